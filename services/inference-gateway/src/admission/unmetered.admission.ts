import type { Admission, AdmissionRequest, AdmissionTicket } from './admission.types';

const EMPTY_HEADERS: Record<string, string> = Object.freeze({}) as Record<string, string>;

/**
 * Admits every request and records nothing: for a gateway without budgets (tests, a private
 * deployment). Tickets are still settled or released by the route, like any other admission's.
 */
export class UnmeteredAdmission implements Admission {
  async admit(_request: AdmissionRequest): Promise<AdmissionTicket> {
    return {
      headers: EMPTY_HEADERS,
      settle: async () => undefined,
      release: async () => undefined,
    };
  }
}
