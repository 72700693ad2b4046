import { randomUUID } from 'node:crypto';
import { formatRateLimitDuration } from '@tollway/contracts';
import type { AdmissionRequest } from './admission.types';

/**
 * Quota a replica holds so it can admit most requests without a Redis round trip.
 *
 * - A **slice** is a share (`fraction`, default 1/64) of each of an organization's three
 *   per-minute budgets, plus an allowance of its credit (the slice's tokens at the model's
 *   prices), taken out of the buckets by the admit script on the back of a request it admits.
 *   While the slice lasts (`useMs`, default 1 s), the replica admits that organization's requests
 *   from it, in process. It gives back what is left when it expires, when a request does not fit
 *   in it, when the organization is changed (pub/sub), or at shutdown; Redis drops a slice its
 *   replica never gave back (the replica died) after `useMs` + a margin.
 * - A **block** is a handful of a model's capacity leases (1/16 of its capacity, at most 64),
 *   renewed like any lease and given back after `blockIdleMs` unused; requests of that model run
 *   on its slots.
 *
 * Exactness: the admit script only grants a slice while every bucket stays at least half full
 * after it (a block: while the model stays at most half busy), and tokens in slices count as in
 * the bucket until used, so nothing is ever over-admitted. Near a limit there are no slices and
 * every request is admitted by Redis, one at a time. A replica returns its slice ahead of any
 * request it sends to Redis, so one replica alone is exact to the request. With several replicas,
 * a slice another replica holds is unavailable to the others for at most `useMs`.
 */
export interface LocalQuotaOptions {
  /** Share of each budget in one slice; default 1/64. */
  fraction?: number;
  /** A slice must cover at least this many requests (like the one asking); default 8. */
  minimum?: number;
  /** How long a replica admits from a slice, ms; default 1000. */
  useMs?: number;
  /** How long Redis keeps a slice its replica never gave back, beyond `useMs`; default 5000. */
  marginMs?: number;
  /** A block unused this long goes back, ms; default 1000. */
  blockIdleMs?: number;
  /** Share of a model's capacity in one block; default 1/16. */
  blockFraction?: number;
  /** Largest block, leases; default 64. */
  maxBlock?: number;
  /** Smallest block worth taking, leases; default 4 (so capacity ≥ 64). */
  minBlock?: number;
}

type Triple = [number, number, number];

/** An organization's slice on this replica. */
export interface QuotaSlice {
  readonly id: string;
  readonly orgId: string;
  /** The three budgets (requests, input tokens, output tokens) when it was granted. */
  readonly caps: Readonly<Triple>;
  /** The buckets' balances in Redis right after the grant, plus refunds this replica sent since. */
  readonly balances: Triple;
  /** What it held when granted. */
  readonly sizes: Readonly<Triple>;
  /** What it holds now (negative when its requests used more than they reserved). */
  readonly left: Triple;
  /** Credit allowance left, USD. */
  usd: number;
  /** Local clock at the grant. */
  readonly grantedAt: number;
  readonly usableUntil: number;
  /** False once given back (or on its way back). */
  live: boolean;
}

/** A block of a model's capacity leases on this replica. */
export interface CapacityBlock {
  readonly id: string;
  readonly modelId: string;
  readonly leaseKey: string;
  /** The model's capacity when it was granted: a block of another capacity is not used. */
  readonly capacity: number;
  /** Lease ids no request runs on. */
  readonly free: string[];
  /** Requests running on its leases. */
  busy: number;
  /** Local clock when it last became wholly free. */
  idleSince: number;
  live: boolean;
}

/** What a request took locally; give it back with `finish`. */
export interface LocalGrant {
  slice: QuotaSlice;
  block: CapacityBlock | null;
  /** The block's lease the request runs on ('' without a block). */
  slot: string;
  /** Requests, input tokens, output tokens taken from the slice. */
  costs: Readonly<Triple>;
  /** Worst-case spend taken from the slice's allowance, USD. */
  usd: number;
}

/** What a request sent to Redis should ask for on the way. */
export interface QuotaPlan {
  /** Slice id to ask for, or ''. */
  sliceId: string;
  /** Block id to ask for, or '' (with its size). */
  blockId: string;
  blockSize: number;
}

/** A slice granted by the admit script (parsed from its reply). */
export interface SliceGrant {
  caps: Triple;
  balances: Triple;
  sizes: Triple;
  usd: number;
}

/** What to give back to Redis (return.lua.ts). */
export interface QuotaReturns {
  slices: Array<{ orgId: string; id: string; left: Triple }>;
  blocks: Array<{ leaseKey: string; leaseIds: readonly string[] }>;
}

/** Most organizations (and models) whose hints a replica keeps; see `sweep`. */
const MAX_HINTS = 10_000;

export const NO_PLAN: QuotaPlan = Object.freeze({ sliceId: '', blockId: '', blockSize: 0 });

/**
 * The bookkeeping of slices and blocks on one replica: no I/O. RedisAdmission asks it first
 * (`tryAdmit`), sends what it could not admit to Redis with a `plan`, installs what the admit
 * script granted, and sends `takeReturns()` to the return script.
 */
export class LocalQuota {
  readonly fraction: number;
  readonly minimum: number;
  readonly useMs: number;
  /** Lifetime of a slice in Redis, ms. */
  readonly ttlMs: number;
  private readonly blockIdleMs: number;
  private readonly blockFraction: number;
  private readonly maxBlock: number;
  private readonly minBlock: number;
  private readonly slices = new Map<string, QuotaSlice>();
  private readonly blocks = new Map<string, CapacityBlock[]>();
  private readonly pendingSlices = new Set<string>();
  private readonly pendingBlocks = new Set<string>();
  /** Slice sizes last granted per organization, to tell whether a request could fit in one. */
  private readonly lastSizes = new Map<string, Triple>();
  /** Models that refused a block recently: local clock until which none is asked for. */
  private readonly noBlockUntil = new Map<string, number>();
  private returns: QuotaReturns = { slices: [], blocks: [] };
  /** Grants installed per organization and per model: a refusal that crossed one is tried again. */
  private readonly grantsByOrg = new Map<string, number>();
  private readonly grantsByModel = new Map<string, number>();
  private enabled = true;
  /** Slices granted since start (each replaces the organization's previous one). */
  sliceGrants = 0;

  constructor(
    private readonly now: () => number,
    options: LocalQuotaOptions = {},
  ) {
    this.fraction = options.fraction ?? 1 / 64;
    this.minimum = options.minimum ?? 8;
    this.useMs = options.useMs ?? 1000;
    this.ttlMs = this.useMs + (options.marginMs ?? 5000);
    this.blockIdleMs = options.blockIdleMs ?? 1000;
    this.blockFraction = options.blockFraction ?? 1 / 16;
    this.maxBlock = options.maxBlock ?? 64;
    this.minBlock = options.minBlock ?? 4;
  }

  /** Slices this replica holds now. */
  slicesHeld(): number {
    return this.slices.size;
  }

  /** Admits `request` from this replica's slice (and block), or returns null: ask Redis. */
  tryAdmit(request: AdmissionRequest): LocalGrant | null {
    if (!this.enabled) return null;
    const slice = this.slices.get(request.principal.orgId);
    if (!slice || this.now() >= slice.usableUntil) return null;
    let block: CapacityBlock | null = null;
    if (request.capacity !== null) {
      block = this.freeBlock(request.modelId, request.capacity);
      if (!block) return null;
    }
    const costs = costsOf(request, slice.caps);
    const usd = worstSpend(request, costs);
    if (costs[0] > slice.left[0] || costs[1] > slice.left[1] || costs[2] > slice.left[2] || usd > slice.usd) {
      return null;
    }
    for (let i = 0; i < 3; i++) slice.left[i]! -= costs[i]!;
    slice.usd -= usd;
    let slot = '';
    if (block) {
      slot = block.free.pop()!;
      block.busy += 1;
    }
    return { slice, block, slot, costs, usd };
  }

  /**
   * What a request that `tryAdmit` refused should ask Redis for on its way. The organization's
   * slice, if any, is given back first, in the same write, so Redis sees every token this replica
   * does not use, and its headers stay exact.
   */
  plan(request: AdmissionRequest): QuotaPlan {
    if (!this.enabled) return NO_PLAN;
    const { orgId } = request.principal;
    const now = this.now();
    const current = this.slices.get(orgId);
    if (current) this.retireSlice(current);

    // A slice is only worth having when this model's requests can also get a slot locally.
    let blockId = '';
    let blockSize = 0;
    let slotsLocally = true;
    if (request.capacity !== null && !this.freeBlock(request.modelId, request.capacity)) {
      const size = this.blockSize(request.capacity);
      if (size < this.minBlock || now < (this.noBlockUntil.get(request.modelId) ?? 0)) slotsLocally = false;
      else if (!this.pendingBlocks.has(request.modelId)) {
        blockId = randomUUID();
        blockSize = size;
        this.pendingBlocks.add(request.modelId);
      }
    }

    let sliceId = '';
    const sizes = this.lastSizes.get(orgId);
    // A request a slice could never hold goes to Redis on its own.
    const couldFit =
      sizes === undefined ||
      [1, request.inputTokens, request.reservedOutputTokens].every((cost, i) => cost * this.minimum <= sizes[i]!);
    if (slotsLocally && couldFit && !this.pendingSlices.has(orgId)) {
      sliceId = randomUUID();
      this.pendingSlices.add(orgId);
    }
    return sliceId === '' && blockId === '' ? NO_PLAN : { sliceId, blockId, blockSize };
  }

  /**
   * Records what the admit script answered to `plan`: null grants when it did not grant them;
   * `admitted` false when the request itself was refused (or Redis failed), so nothing was asked.
   * Returns the block installed, if any (its leases need renewing).
   */
  planAnswered(
    request: AdmissionRequest,
    plan: QuotaPlan,
    admitted: boolean,
    slice: SliceGrant | null,
    block: { leaseKey: string } | null,
  ): CapacityBlock | null {
    const { orgId } = request.principal;
    if (plan.sliceId !== '') {
      this.pendingSlices.delete(orgId);
      if (slice) {
        this.lastSizes.set(orgId, slice.sizes);
        const grantedAt = this.now();
        const installed: QuotaSlice = {
          id: plan.sliceId,
          orgId,
          caps: slice.caps,
          balances: [...slice.balances],
          sizes: slice.sizes,
          left: [...slice.sizes],
          usd: slice.usd,
          grantedAt,
          usableUntil: grantedAt + this.useMs,
          live: true,
        };
        this.grantsByOrg.set(orgId, (this.grantsByOrg.get(orgId) ?? 0) + 1);
        this.sliceGrants++;
        const previous = this.slices.get(orgId);
        if (previous) this.retireSlice(previous);
        this.slices.set(orgId, installed);
        // Disabled meanwhile (the change channel dropped): straight back.
        if (!this.enabled) this.retireSlice(installed);
      }
    }
    if (plan.blockId === '') return null;
    this.pendingBlocks.delete(request.modelId);
    if (!block || request.capacity === null) {
      if (!admitted) return null;
      // The model is busy: no block (and so no slice for its requests) for a while.
      this.noBlockUntil.set(request.modelId, this.now() + this.useMs);
      return null;
    }
    const installed: CapacityBlock = {
      id: plan.blockId,
      modelId: request.modelId,
      leaseKey: block.leaseKey,
      capacity: request.capacity,
      free: Array.from({ length: plan.blockSize }, (_, j) => `${plan.blockId}:${j + 1}`),
      busy: 0,
      idleSince: this.now(),
      live: true,
    };
    this.grantsByModel.set(request.modelId, (this.grantsByModel.get(request.modelId) ?? 0) + 1);
    const list = this.blocks.get(request.modelId);
    if (list) list.push(installed);
    else this.blocks.set(request.modelId, [installed]);
    return installed;
  }

  /**
   * A request admitted from `grant` finished: its slot is free again, and the slice takes back
   * `refund` (what it took and did not use) when it is still live. False when the slice is gone:
   * the caller settles the refund with Redis.
   */
  finish(grant: LocalGrant, refund: Readonly<Triple>, usdRefund: number): boolean {
    const { block, slice } = grant;
    if (block) {
      block.busy -= 1;
      if (block.live) {
        block.free.push(grant.slot);
        if (block.busy === 0) block.idleSince = this.now();
      } else {
        // Its free leases went back already (giveBackFreeLeases): this one follows.
        this.returns.blocks.push({ leaseKey: block.leaseKey, leaseIds: [grant.slot] });
      }
    }
    if (!slice.live) return false;
    for (let i = 0; i < 3; i++) slice.left[i]! += refund[i]!;
    slice.usd += usdRefund;
    return true;
  }

  /** The organization changed (budgets, credit) or is gone: its slice goes back. */
  invalidate(orgId: string): void {
    const slice = this.slices.get(orgId);
    if (slice) this.retireSlice(slice);
    this.lastSizes.delete(orgId);
  }

  /** Stops (false: every slice goes back, nothing is admitted locally) or resumes local admission. */
  setEnabled(enabled: boolean): void {
    this.enabled = enabled;
    if (!enabled) for (const slice of [...this.slices.values()]) this.retireSlice(slice);
  }

  /** Gives back expired slices and blocks unused for `blockIdleMs` (or all, at shutdown). */
  sweep(all = false): void {
    const now = this.now();
    // Hints kept per organization and model: forgetting them costs at most a retry or a request
    // that asks for a slice in vain, so they are dropped rather than allowed to grow without end.
    for (const hints of [this.lastSizes, this.noBlockUntil, this.grantsByOrg, this.grantsByModel]) {
      if (hints.size > MAX_HINTS) hints.clear();
    }
    for (const slice of [...this.slices.values()]) {
      if (all || now >= slice.usableUntil) this.retireSlice(slice);
    }
    for (const [modelId, list] of this.blocks) {
      const kept = list.filter((block) => {
        if (block.busy > 0 || (!all && now - block.idleSince < this.blockIdleMs)) return true;
        this.retireBlock(block);
        return false;
      });
      if (kept.length > 0) this.blocks.set(modelId, kept);
      else this.blocks.delete(modelId);
    }
  }

  /** What is waiting to go back to Redis (then forgotten here); null when nothing is. */
  takeReturns(): QuotaReturns | null {
    if (this.returns.slices.length === 0 && this.returns.blocks.length === 0) return null;
    const taken = this.returns;
    this.returns = { slices: [], blocks: [] };
    return taken;
  }

  /** The `x-ratelimit-*` headers of a request admitted from `slice`, as if from the buckets. */
  headers(slice: QuotaSlice): Record<string, string> {
    // Runs on every locally admitted request: no arrays or closures, literal header names (the
    // same as RATE_LIMIT_HEADERS) so the object gets a fast shape.
    const elapsed = Math.max(0, this.now() - slice.grantedAt);
    const requests = remainingIn(slice, 0, elapsed);
    const input = remainingIn(slice, 1, elapsed);
    const output = remainingIn(slice, 2, elapsed);
    const [capReq, capIn, capOut] = slice.caps;
    // The token headers describe whichever token bucket is nearer its limit, as the admit script.
    const outputNearer = capOut > 0 && (capIn <= 0 || output / capOut < input / capIn);
    const capTok = outputNearer ? capOut : capIn;
    const tokens = outputNearer ? output : input;
    return {
      'x-ratelimit-limit-requests': String(capReq),
      'x-ratelimit-remaining-requests': String(Math.max(0, Math.floor(requests))),
      'x-ratelimit-reset-requests': formatRateLimitDuration(msToFull(capReq, requests)),
      'x-ratelimit-limit-tokens': String(capTok),
      'x-ratelimit-remaining-tokens': String(Math.max(0, Math.floor(tokens))),
      'x-ratelimit-reset-tokens': formatRateLimitDuration(msToFull(capTok, tokens)),
    };
  }

  /**
   * Redis refused `request` while this replica may hold what it lacked (a slice or a block granted
   * on the back of a request sent in the same write): gives back the organization's slice and the
   * model's blocks, so a second try sees everything. True when there was something to give back,
   * or something was granted since `epoch` (taken with `epochOf` before the request was sent).
   */
  giveBackFor(request: AdmissionRequest, epoch: number): boolean {
    let any = this.epochOf(request) !== epoch;
    const slice = this.slices.get(request.principal.orgId);
    if (slice) {
      this.retireSlice(slice);
      any = true;
    }
    const list = this.blocks.get(request.modelId);
    if (list) {
      for (const block of list) {
        if (block.free.length > 0) any = true;
        this.retireBlock(block);
      }
      this.blocks.delete(request.modelId);
    }
    return any;
  }

  /** Changes whenever a slice of the request's organization or a block of its model is installed. */
  epochOf(request: AdmissionRequest): number {
    return (this.grantsByOrg.get(request.principal.orgId) ?? 0) + (this.grantsByModel.get(request.modelId) ?? 0);
  }

  /**
   * This replica sent Redis a refund (or charge) of an organization's buckets: the headers of its
   * slice count it, as the buckets do.
   */
  noteBucketRefund(orgId: string, refund: Readonly<Triple>): void {
    const slice = this.slices.get(orgId);
    if (!slice) return;
    for (let i = 0; i < 3; i++) slice.balances[i]! += refund[i]!;
  }

  private blockSize(capacity: number): number {
    return Math.min(this.maxBlock, Math.floor(capacity * this.blockFraction));
  }

  private freeBlock(modelId: string, capacity: number): CapacityBlock | null {
    const list = this.blocks.get(modelId);
    if (!list) return null;
    for (const block of list) if (block.capacity === capacity && block.free.length > 0) return block;
    return null;
  }

  /** Gives back a block's free leases; those in use follow as their requests finish. */
  private retireBlock(block: CapacityBlock): void {
    if (!block.live) return;
    block.live = false;
    if (block.free.length > 0) this.returns.blocks.push({ leaseKey: block.leaseKey, leaseIds: block.free.splice(0) });
  }

  private retireSlice(slice: QuotaSlice): void {
    if (this.slices.get(slice.orgId) === slice) this.slices.delete(slice.orgId);
    if (!slice.live) return;
    slice.live = false;
    this.returns.slices.push({ orgId: slice.orgId, id: slice.id, left: [...slice.left] });
  }
}

/**
 * Bucket `i` as its headers describe it: the balance Redis had after the grant, refilled since
 * (up to the budget less this slice), plus what the slice still holds.
 */
function remainingIn(slice: QuotaSlice, i: 0 | 1 | 2, elapsedMs: number): number {
  const cap = slice.caps[i];
  const bucket = Math.min(cap - slice.sizes[i], slice.balances[i] + (elapsedMs * cap) / 60_000);
  return Math.min(cap, bucket + slice.left[i]);
}

/** Milliseconds until a bucket of `cap` holding `balance` is full again. */
function msToFull(cap: number, balance: number): number {
  return cap <= 0 || balance >= cap ? 0 : Math.ceil(((cap - balance) * 60_000) / cap);
}

/** What a request takes from the buckets: 1 request, its input tokens, its output reservation. */
function costsOf(request: AdmissionRequest, caps: Readonly<Triple>): Triple {
  let output = request.reservedOutputTokens;
  // As the admit script does: a default reservation is capped at the output budget.
  if (request.reservationIsDefault && output > caps[2]) output = caps[2];
  return [1, request.inputTokens, output];
}

/** The most this request can spend: its input and reserved output at the model's prices, USD. */
function worstSpend(request: AdmissionRequest, costs: Readonly<Triple>): number {
  return (costs[1] * request.pricePerMillion.input + costs[2] * request.pricePerMillion.output) / 1_000_000;
}
