/**
 * The project both compose suites run: a database-like service (busybox `nc` storing each line a
 * client sends, httpd serving what was stored, a healthcheck), a one-shot migration, a web server on
 * a published port and a worker that writes to the database through its network alias, each row
 * until stored (a lookup while aardvark-dns reloads can fail: docs/compat.md), and exits with 3 once
 * /tmp/exit appears, for the restart policy. Written as
 * JSON (which is YAML) so that compose v1 and v2 read the same file; `$$` is compose's escape of `$`.
 */
export interface AppOptions {
  image: string;
  /** Host port on 127.0.0.1 for web's 8080. */
  port: number;
}

// The database's per-connection handler: one line in, appended to /data/rows.
const STORE = `printf '#!/bin/sh\\nread l\\necho "$$l" >> /data/rows\\necho stored\\n' > /store && chmod +x /store`;

export function appProject(o: AppOptions): Record<string, unknown> {
  const image = o.image;
  return {
    services: {
      db: {
        image,
        command: ['sh', '-c', `mkdir -p /data && touch /data/rows && ${STORE} && httpd -p 5433 -h /data && exec nc -ll -p 6379 -e /store`],
        networks: { backend: { aliases: ['database'] } },
        healthcheck: { test: ['CMD', 'wget', '-q', '-O', '/dev/null', 'http://127.0.0.1:5433/rows'], interval: '1s', timeout: '3s', retries: 60 },
        labels: { 'com.example.role': 'db' },
      },
      migrate: {
        image,
        command: ['sh', '-c', 'echo migrated'],
        networks: ['backend'],
      },
      web: {
        image,
        command: ['sh', '-c', 'mkdir -p /www && echo web-ok > /www/index.html && exec httpd -f -p 8080 -h /www'],
        ports: [`127.0.0.1:${o.port}:8080`],
        networks: ['frontend', 'backend'],
        depends_on: { db: { condition: 'service_healthy' }, migrate: { condition: 'service_completed_successfully' } },
        healthcheck: { test: ['CMD', 'wget', '-q', '-O', '/dev/null', 'http://127.0.0.1:8080/'], interval: '1s', timeout: '3s', retries: 60 },
        init: true,
        tmpfs: ['/scratch'],
        ulimits: { nofile: { soft: 1024, hard: 2048 } },
        mem_limit: '64m',
        cpus: 0.5,
        pids_limit: 100,
        restart: 'unless-stopped',
        labels: { 'com.example.role': 'web' },
      },
      worker: {
        image,
        command: ['sh', '-c', 'i=0; while true; do if [ -f /tmp/exit ]; then rm /tmp/exit; exit 3; fi; i=$$((i+1)); until [ -f /tmp/exit ] || echo row-$$i | nc -w 3 database 6379 >/dev/null; do sleep 0.2; done; [ -f /tmp/exit ] || echo "stored row-$$i"; sleep 1; done'],
        networks: ['backend', 'frontend'],
        depends_on: { db: { condition: 'service_healthy' }, web: { condition: 'service_started' } },
        restart: 'always',
      },
      debug: {
        image,
        command: ['sleep', '300'],
        profiles: ['debug'],
        networks: ['frontend'],
      },
    },
    networks: { frontend: {}, backend: {} },
  };
}
