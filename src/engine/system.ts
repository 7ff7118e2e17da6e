/** Facts about the host and the daemon for GET /info and GET /version. */
import { cpus, totalmem, hostname, release, arch as nodeArch } from 'node:os';
import { readFileSync } from 'node:fs';

export interface HostFacts {
  kernelVersion: string;
  operatingSystem: string;
  osVersion: string;
  architecture: string;
  goArch: string;
  ncpu: number;
  memTotal: number;
  name: string;
}

const GO_ARCH: Record<string, string> = { x64: 'amd64', arm64: 'arm64', arm: 'arm', ia32: '386', ppc64: 'ppc64le', s390x: 's390x' };
const UNAME_ARCH: Record<string, string> = { x64: 'x86_64', arm64: 'aarch64', arm: 'armv7l', ia32: 'i686', ppc64: 'ppc64le', s390x: 's390x' };

export function hostFacts(): HostFacts {
  let operatingSystem = 'Linux';
  let osVersion = '';
  try {
    const osr = readFileSync('/etc/os-release', 'utf8');
    operatingSystem = /^PRETTY_NAME="?([^"\n]*)"?/m.exec(osr)?.[1] ?? operatingSystem;
    osVersion = /^VERSION_ID="?([^"\n]*)"?/m.exec(osr)?.[1] ?? '';
  } catch {
    /* not every host has os-release */
  }
  return {
    kernelVersion: release(),
    operatingSystem,
    osVersion,
    architecture: UNAME_ARCH[nodeArch()] ?? nodeArch(),
    goArch: GO_ARCH[nodeArch()] ?? nodeArch(),
    ncpu: cpus().length,
    memTotal: totalmem(),
    name: hostname(),
  };
}

/** The platform images are pulled for by default. */
export function defaultPlatform(): { os: string; architecture: string; variant?: string } {
  const a = GO_ARCH[nodeArch()] ?? 'amd64';
  return a === 'arm64' ? { os: 'linux', architecture: a, variant: 'v8' } : { os: 'linux', architecture: a };
}
