// The command line of a bench script, read with node's own parseArgs: an unknown option, a missing
// value or a number that is not one stops the script with its usage line instead of being ignored.
import { parseArgs } from 'node:util';

/**
 * Reads `process.argv` for a bench: `numbers` and `strings` map option names (without `--`) to
 * their defaults, `flags` lists boolean options (false unless given). Returns one object of
 * values by option name. A string value starting with a dash is given as `--name=--value`.
 */
export function benchArgs(usage, { numbers = {}, strings = {}, flags = [] }) {
  const options = {};
  for (const name of [...Object.keys(numbers), ...Object.keys(strings)]) options[name] = { type: 'string' };
  for (const name of flags) options[name] = { type: 'boolean' };
  let values;
  try {
    ({ values } = parseArgs({ args: process.argv.slice(2), options, strict: true, allowPositionals: false }));
  } catch (err) {
    fail(usage, err.message);
  }
  const result = {};
  for (const [name, fallback] of Object.entries(numbers)) {
    const value = values[name] === undefined ? fallback : Number(values[name]);
    if (!Number.isFinite(value) || value < 0) fail(usage, `--${name} takes a number ≥ 0, not ${values[name]}`);
    result[name] = value;
  }
  for (const [name, fallback] of Object.entries(strings)) result[name] = values[name] ?? fallback;
  for (const name of flags) result[name] = values[name] === true;
  return result;
}

function fail(usage, message) {
  console.error(`${message}\nusage: ${usage}`);
  process.exit(2);
}
