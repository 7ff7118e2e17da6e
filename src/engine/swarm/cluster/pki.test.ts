import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate, createPublicKey } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { csrFor, newCa, newCsr, signNode, type CertPair } from './pki.js';

describe('node certificates', () => {
  let dir: string;
  let ca: CertPair;
  let csr: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-pki-'));
    ca = await newCa(dir);
    csr = (await newCsr(dir)).csr;
  });
  after(() => rm(dir, { recursive: true, force: true }));

  const who = (ips: string[]) => ({ nodeId: 'n1', role: 'worker' as const, clusterId: 'c1', ips, seconds: 86400 });

  it('signs a node certificate for its address: no CA, the node id as CN', async () => {
    const cert = new X509Certificate(await signNode(dir, ca, csr, who(['10.1.2.3'])));
    assert.ok(!cert.ca);
    assert.match(cert.subject, /CN=n1/);
    assert.match(cert.subjectAltName ?? '', /IP Address:10\.1\.2\.3/);
    assert.ok(cert.verify(new X509Certificate(ca.cert).publicKey));
  });

  it('refuses an address that is no IP address: a joining node cannot write its own extensions', async () => {
    const forged = '10.1.2.3\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,digitalSignature';
    await assert.rejects(signNode(dir, ca, csr, who([forged])), /not an IP address/);
    await assert.rejects(signNode(dir, ca, csr, who(['10.1.2.3,DNS:evil'])), /not an IP address/);
  });

  it('signs for the validity asked, to the second (dockerd\'s NodeCertExpiry may be an hour)', async () => {
    const cert = new X509Certificate(await signNode(dir, ca, csr, { ...who(['10.1.2.3']), role: 'manager', seconds: 3600 }));
    const left = Date.parse(cert.validTo) - Date.now();
    assert.ok(left > 3590_000 && left <= 3600_000, `${cert.validTo}`);
    assert.equal(cert.subject, 'O=c1\nOU=swarm-manager\nCN=n1');
  });

  it('renews for the key the node has', async () => {
    const made = await newCsr(dir);
    const cert = new X509Certificate(await signNode(dir, ca, await csrFor(dir, made.key), who(['10.1.2.3'])));
    assert.ok(cert.publicKey.equals(createPublicKey(made.key)));
  });
});
