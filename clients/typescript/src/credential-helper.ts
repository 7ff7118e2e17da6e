/**
 * Talks to docker-credential-<name> programs (the protocol of docker's credential helpers):
 * `get` reads a server URL on stdin and prints {ServerURL, Username, Secret}; `store` reads that
 * object; a helper that has nothing prints "credentials not found" and exits non-zero.
 */
import { spawn } from 'node:child_process';
import type { AuthConfig } from './models.js';

/** The username helpers use to mark the secret as an identity token. */
const TOKEN_USERNAME = '<token>';

export class CredentialHelperError extends Error {
  override name = 'CredentialHelperError';
}

interface HelperReply {
  ServerURL?: string;
  Username?: string;
  Secret?: string;
}

/** Credentials the helper holds for `serverUrl`, or undefined when it has none. */
export async function helperGet(helper: string, serverUrl: string): Promise<AuthConfig | undefined> {
  const { code, stdout, stderr } = await runHelper(helper, 'get', serverUrl);
  if (code !== 0) {
    if (/credentials not found/i.test(stdout + stderr)) return undefined;
    throw new CredentialHelperError(`docker-credential-${helper} get failed: ${(stdout + stderr).trim() || `exit ${code}`}`);
  }
  const reply = JSON.parse(stdout) as HelperReply;
  if (!reply.Secret && !reply.Username) return undefined;
  if (reply.Username === TOKEN_USERNAME) return { identitytoken: reply.Secret ?? '', serveraddress: serverUrl };
  return { username: reply.Username ?? '', password: reply.Secret ?? '', serveraddress: serverUrl };
}

/** Hands credentials to the helper to keep. */
export async function helperStore(helper: string, serverUrl: string, auth: AuthConfig): Promise<void> {
  const body: HelperReply = auth.identitytoken
    ? { ServerURL: serverUrl, Username: TOKEN_USERNAME, Secret: auth.identitytoken }
    : { ServerURL: serverUrl, Username: auth.username ?? '', Secret: auth.password ?? '' };
  const { code, stdout, stderr } = await runHelper(helper, 'store', JSON.stringify(body));
  if (code !== 0) throw new CredentialHelperError(`docker-credential-${helper} store failed: ${(stdout + stderr).trim() || `exit ${code}`}`);
}

function runHelper(helper: string, action: string, input: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(`docker-credential-${helper}`, [action], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', (err) => reject(new CredentialHelperError(`cannot run docker-credential-${helper}: ${err.message}`)));
    child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
    child.stdin.on('error', () => undefined); // a helper that exits early closes its stdin; the exit code tells
    child.stdin.end(input);
  });
}
