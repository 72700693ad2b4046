/**
 * The ports `TOLLWAY_TEST_PORTS` (`low-high`, both included) gives the tests of one checkout, so
 * that engineers sharing a machine never pick each other's; null when unset.
 */
export function testPortRange(env: NodeJS.ProcessEnv = process.env): readonly [number, number] | null {
  const value = env.TOLLWAY_TEST_PORTS;
  if (value === undefined || value === '') return null;
  const match = /^([0-9]{4,5})-([0-9]{4,5})$/.exec(value);
  const [low, high] = match ? [Number(match[1]), Number(match[2])] : [0, -1];
  if (!match || low < 1024 || high > 65535 || high < low) {
    throw new Error(
      `TOLLWAY_TEST_PORTS must be low-high, from 1024 to 65535 (22000-22999): got ${JSON.stringify(value)}`,
    );
  }
  return [low, high];
}
