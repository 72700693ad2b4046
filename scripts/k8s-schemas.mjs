#!/usr/bin/env node
// Checks Kubernetes objects against the API's schemas: Kubernetes' own (kubernetes-models, built
// from its OpenAPI document), KEDA's (@kubernetes-models/keda) and the Prometheus Operator's
// (@kubernetes-models/prometheus-operator), built from their CRDs. Reads on stdin a JSON array of
// sets of objects (one set per rendering) and prints, for each set, a JSON array of errors,
// `Kind name: what is wrong`, empty when every object is valid. An object whose apiVersion and kind it has no schema for is an error too, so a new kind
// in the chart cannot go unchecked. These packages are ES modules only, so the chart test (Jest,
// CommonJS) runs this as a child process, once for all its renderings.

/** The module of models for each API group and version. */
function modelsOf(apiVersion) {
  if (apiVersion.startsWith('keda.sh/')) return import(`@kubernetes-models/keda/${apiVersion}`);
  if (apiVersion.startsWith('monitoring.coreos.com/')) {
    return import(`@kubernetes-models/prometheus-operator/${apiVersion}`);
  }
  return import(`kubernetes-models/${apiVersion}`);
}

async function validate(object) {
  const where = `${object?.kind} ${object?.metadata?.name}`;
  let Model;
  try {
    Model = (await modelsOf(object.apiVersion))[object.kind];
  } catch {
    Model = undefined;
  }
  if (!Model) return [`${where}: no schema for ${object?.apiVersion} ${object?.kind}`];
  try {
    new Model(object).validate();
    return [];
  } catch (err) {
    return [`${where}: ${err.message}`];
  }
}

let input = '';
for await (const chunk of process.stdin) input += chunk;
const errors = await Promise.all(
  JSON.parse(input).map(async (objects) => (await Promise.all(objects.map(validate))).flat()),
);
process.stdout.write(JSON.stringify(errors));
