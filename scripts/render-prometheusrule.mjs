#!/usr/bin/env node
// Writes deploy/kubernetes/base/prometheusrule.yaml from deploy/prometheus/longrun-rules.yml:
// the same rule groups, wrapped in a Prometheus Operator PrometheusRule. Run it after
// editing the rules; test/integration/deploy-manifests.test.ts fails while the two differ.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const rules = YAML.parse(readFileSync(path.join(root, 'deploy/prometheus/longrun-rules.yml'), 'utf8'));
const resource = {
  apiVersion: 'monitoring.coreos.com/v1',
  kind: 'PrometheusRule',
  metadata: { name: 'longrun', labels: { 'app.kubernetes.io/name': 'longrun' } },
  spec: { groups: rules.groups },
};
const header = [
  '# Generated from deploy/prometheus/longrun-rules.yml by scripts/render-prometheusrule.mjs:',
  '# edit the rules there and run the script. Runbooks: docs/operating.md ("Alerts").',
  '',
].join('\n');
writeFileSync(path.join(root, 'deploy/kubernetes/base/prometheusrule.yaml'), header + YAML.stringify(resource, { lineWidth: 0 }));
