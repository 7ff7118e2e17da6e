/** Facts about the host and the daemon for GET /info and GET /version. */
import { cpus, totalmem, hostname, release, arch as nodeArch } from 'node:os';
import { readFileSync } from 'node:fs';
import { hostPlatform } from '../lib/platform.js';

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
    goArch: hostPlatform().architecture,
    ncpu: cpus().length,
    memTotal: totalmem(),
    name: hostname(),
  };
}
