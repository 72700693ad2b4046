import type { CreateChatCompletionRequest } from '@tollway/contracts';
import { MAX_TIMER_MS } from '@tollway/service-kit';
import { SimulationOptions } from '../../catalog/catalog.schema';
import { ClientAbort, EngineAbortedError, type AbortLike } from '../engine.types';
import { Simulator } from './simulator';

const request = {
  model: 'sim',
  messages: [{ role: 'user', content: 'Count to a hundred.' }],
  max_tokens: 100,
} as CreateChatCompletionRequest;
const streamOptions = { includeUsage: true, continuousUsage: true };

/** The two kinds of abort the simulator is given: the gateway's ClientAbort, the sim server's AbortSignal. */
const aborts: Array<[string, () => { signal: AbortLike; abort: () => void }]> = [
  [
    'ClientAbort',
    () => {
      const abort = new ClientAbort();
      return { signal: abort, abort: () => abort.abort() };
    },
  ],
  [
    'AbortSignal',
    () => {
      const controller = new AbortController();
      return { signal: controller.signal, abort: () => controller.abort() };
    },
  ],
];

function simulator(options: Partial<SimulationOptions>): Simulator {
  return new Simulator(SimulationOptions.parse({ ignore_eos: true, ...options }));
}

describe.each(aborts)('Simulator aborted through a %s', (_kind, makeAbort) => {
  it('stops a stream between tokens at once and reports the tokens produced so far', async () => {
    // Tokens 300 ms apart, so "at once" is told from "at the next token" on a loaded machine too.
    const sim = simulator({ time_to_first_token_ms: 0, time_per_output_token_ms: 300 });
    const { signal, abort } = makeAbort();
    const stream = sim.stream(request, signal, streamOptions);
    await stream.next();
    await stream.next();
    const started = performance.now();
    setTimeout(abort, 10);
    const error = await stream.next().then(
      () => null,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(EngineAbortedError);
    expect(performance.now() - started).toBeLessThan(150);
    const usage = (error as EngineAbortedError).usage!;
    expect(usage.completion_tokens).toBeGreaterThanOrEqual(1);
    expect(usage.completion_tokens).toBeLessThan(100);
    expect(sim.load()).toEqual({ running: 0, waiting: 0 });
  });

  it('stops a completion waiting for its tokens', async () => {
    const sim = simulator({ time_to_first_token_ms: 0, time_per_output_token_ms: 50 });
    const { signal, abort } = makeAbort();
    const completion = sim.complete(request, signal);
    setTimeout(abort, 20);
    await expect(completion).rejects.toBeInstanceOf(EngineAbortedError);
    expect(sim.load()).toEqual({ running: 0, waiting: 0 });
  });

  it('takes a request waiting for a slot out of the line, and the slot goes to the next', async () => {
    const sim = simulator({ time_to_first_token_ms: 0, time_per_output_token_ms: 5, max_concurrency: 1 });
    const holder = makeAbort();
    const running = sim.stream(request, holder.signal, streamOptions);
    await running.next();
    const waiter = makeAbort();
    const waiting = sim.stream(request, waiter.signal, streamOptions).next();
    const third = sim.complete(request, makeAbort().signal);
    await new Promise((resolve) => setImmediate(resolve));
    expect(sim.load()).toEqual({ running: 1, waiting: 2 });
    waiter.abort();
    await expect(waiting).rejects.toBeInstanceOf(EngineAbortedError);
    expect(sim.load()).toEqual({ running: 1, waiting: 1 });
    holder.abort();
    await expect(running.next()).rejects.toBeInstanceOf(EngineAbortedError);
    const answer = await third;
    expect(answer.usage?.completion_tokens).toBe(100);
    expect(sim.load()).toEqual({ running: 0, waiting: 0 });
  });

  it('refuses at once when the abort came before the call', async () => {
    const sim = simulator({ time_to_first_token_ms: 1000 });
    const { signal, abort } = makeAbort();
    abort();
    const started = performance.now();
    await expect(sim.complete(request, signal)).rejects.toBeInstanceOf(EngineAbortedError);
    expect(performance.now() - started).toBeLessThan(100);
  });
});

describe('Simulator delays', () => {
  it('refuses a delay past the longest a timer waits', () => {
    for (const field of ['time_to_first_token_ms', 'time_per_output_token_ms']) {
      expect(SimulationOptions.safeParse({ [field]: MAX_TIMER_MS }).success).toBe(true);
      expect(SimulationOptions.safeParse({ [field]: MAX_TIMER_MS + 1 }).success).toBe(false);
    }
  });

  // 100 tokens of the longest delay add up past what a timer holds, which Node fires after 1 ms.
  it('waits a completion whose delays add up past the longest timer, until it is aborted', async () => {
    const sim = simulator({ time_to_first_token_ms: 0, time_per_output_token_ms: MAX_TIMER_MS });
    const { signal, abort } = aborts[0]![1]();
    const completion = sim.complete(request, signal);
    const settled = await Promise.race([
      completion.then(
        () => 'answered',
        () => 'aborted',
      ),
      new Promise((resolve) => setTimeout(resolve, 200, 'waiting')),
    ]);
    expect(settled).toBe('waiting');
    abort();
    await expect(completion).rejects.toBeInstanceOf(EngineAbortedError);
  });
});

describe('ClientAbort as an AbortLike', () => {
  it('calls a listener once, and not at all once it was removed', () => {
    const abort = new ClientAbort();
    const heard: string[] = [];
    const kept = () => heard.push('kept');
    const removed = () => heard.push('removed');
    abort.addEventListener('abort', kept);
    abort.addEventListener('abort', removed);
    abort.removeEventListener('abort', removed);
    abort.abort();
    abort.abort();
    expect(heard).toEqual(['kept']);
    expect(abort.listenerCount('abort')).toBe(0);
  });
});
