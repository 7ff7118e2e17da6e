import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { X509Certificate } from 'node:crypto';
import { certSeconds, renewalDue } from './node-certs.js';
import { SECOND_NS, type ClusterRecord } from './swarm-model.js';

const cluster = (expiry?: number) => ({ spec: { CAConfig: expiry === undefined ? {} : { NodeCertExpiry: expiry } } }) as unknown as ClusterRecord;

describe('node certificate renewal', () => {
  it('is due between half and four fifths of the validity', () => {
    const cert = { validFrom: 'Jan  1 00:00:00 2030 GMT', validTo: 'Jan  1 01:40:00 2030 GMT' } as X509Certificate;
    const from = Date.parse('2030-01-01T00:00:00Z');
    assert.equal(renewalDue(cert, 0), from + 3000_000);
    assert.equal(renewalDue(cert, 0.999999) > from + 4799_000, true);
    assert.equal(renewalDue(cert, 0.999999) < from + 4800_000, true);
  });

  it('lasts NodeCertExpiry (90 days unset, an hour at least); the test variable says shorter', () => {
    assert.equal(certSeconds(cluster(), {}), 90 * 86400);
    assert.equal(certSeconds(cluster(2 * 3600 * SECOND_NS), {}), 7200);
    assert.equal(certSeconds(cluster(60 * SECOND_NS), {}), 3600);
    assert.equal(certSeconds(cluster(), { BERTH_SWARM_NODE_CERT_SECONDS: '40' }), 40);
    assert.equal(certSeconds(cluster(), { BERTH_SWARM_NODE_CERT_SECONDS: 'x' }), 90 * 86400);
  });
});
