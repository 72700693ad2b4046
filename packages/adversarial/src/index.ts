export { caseArbitrary } from './case-arbitraries';
export { CaseStream } from './case-stream';
export { ensureBuilt } from './built-services';
export { Campaign, type CampaignLimits, type Finding, type Tally } from './campaign';
export { describeCase, encodeCase, type FuzzCase, type ServiceName } from './fuzz-case';
export { loadFuzzConfig, type FuzzConfig } from './fuzz-config';
export { judgeAnswer, type Problem } from './oracles';
export { Platform } from './platform';
export { sendRaw, type Outcome } from './raw-http';
