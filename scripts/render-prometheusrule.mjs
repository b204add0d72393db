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
// The page the runbook_urls point at (every alert's is <page>#alerts): an overlay sets it
// with this annotation, which the base's kustomization copies into every runbook_url.
const pages = new Set(rules.groups.flatMap((g) => g.rules.flatMap((r) => (r.annotations?.runbook_url ? [r.annotations.runbook_url.split('#')[0]] : []))));
if (pages.size !== 1) throw new Error(`every runbook_url must point at one page, found ${[...pages].join(', ')}`);
const resource = {
  apiVersion: 'monitoring.coreos.com/v1',
  kind: 'PrometheusRule',
  metadata: { name: 'longrun', labels: { 'app.kubernetes.io/name': 'longrun' }, annotations: { 'longrun/runbook-page': [...pages][0] } },
  spec: { groups: rules.groups },
};
const header = [
  '# Generated from deploy/prometheus/longrun-rules.yml by scripts/render-prometheusrule.mjs:',
  '# edit the rules there and run the script. Runbooks: docs/operating.md ("Alerts"), at the',
  '# page named by the longrun/runbook-page annotation (kustomization.yaml copies it into every',
  '# runbook_url; set it in your overlay: docs/deploying.md, "Alert runbooks").',
  '',
].join('\n');
writeFileSync(path.join(root, 'deploy/kubernetes/base/prometheusrule.yaml'), header + YAML.stringify(resource, { lineWidth: 0 }));
