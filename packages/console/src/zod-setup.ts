import { z } from 'zod';

// Zod compiles fast object parsers with `new Function` when eval is allowed, and probes for it
// while the contract schemas are being defined. The console's CSP forbids eval, and the probe
// alone would be reported as a violation: so parse without, set before any schema module loads.
z.config({ jitless: true });
