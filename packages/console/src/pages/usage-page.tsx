import type { OrganizationUsage } from '@tollway/contracts';
import type { RefObject } from 'preact';
import { api } from '../api';
import { MinuteChart } from '../components/minute-chart';
import { SessionsPanel } from '../components/session-limits';
import { Empty, ErrorNote, Loading, TableWrap } from '../components/status';
import { formatInteger, formatTime, formatUsd } from '../format';
import { OrgHeading } from './org-heading';
import { useResource } from '../use-resource';

/** How often the usage page refreshes while open, ms. */
const REFRESH_MS = 5000;

/** An organization's last hour: requests and tokens per minute as charts, spend per model as a table. */
export function UsagePage(props: { orgId: string; operator: boolean; heading: RefObject<HTMLHeadingElement> }) {
  const usage = useResource(() => api.usage(props.orgId), [props.orgId], REFRESH_MS);
  // The organization, for its heading and its live sessions and turns, refreshed with the usage.
  const org = useResource(() => api.organization(props.orgId), [props.orgId], REFRESH_MS);
  return (
    <>
      <OrgHeading org={org} orgId={props.orgId} page="usage" operator={props.operator} heading={props.heading} />
      {org.data && <SessionsPanel org={org.data} />}
      <p class="hint">
        The last hour, per minute; refreshed every {REFRESH_MS / 1000} seconds while this page is open.
      </p>
      {usage.loading && !usage.data && <Loading what="usage" />}
      {usage.error && <ErrorNote message={usage.error} onRetry={usage.reload} />}
      {usage.data && <UsageView usage={usage.data} />}
    </>
  );
}

function UsageView({ usage }: { usage: OrganizationUsage }) {
  const minutes: number[] = [];
  for (let t = usage.start; t < usage.end; t += 60) minutes.push(t);
  const byMinute = new Map(usage.by_minute.map((m) => [m.minute, m]));
  const column = (field: 'requests' | 'input_tokens' | 'output_tokens') =>
    minutes.map((t) => byMinute.get(t)?.[field] ?? 0);
  const { totals } = usage;
  return (
    <>
      <section aria-labelledby="totals-title" class="totals">
        <h2 id="totals-title">Last hour</h2>
        <dl>
          <div>
            <dt>Requests</dt>
            <dd data-testid="total-requests">{formatInteger(totals.requests)}</dd>
          </div>
          <div>
            <dt>Input tokens</dt>
            <dd>{formatInteger(totals.input_tokens)}</dd>
          </div>
          <div>
            <dt>Output tokens</dt>
            <dd>{formatInteger(totals.output_tokens)}</dd>
          </div>
          <div>
            <dt>Spend</dt>
            <dd>{formatUsd(totals.spend)}</dd>
          </div>
        </dl>
      </section>
      <div class="charts">
        <MinuteChart
          title="Requests per minute"
          summary={`${formatInteger(totals.requests)} requests in the last hour`}
          minutes={minutes}
          series={[{ label: 'Requests', stroke: '#1d4ed8', values: column('requests') }]}
        />
        <MinuteChart
          title="Tokens per minute"
          summary={`${formatInteger(totals.input_tokens)} input and ${formatInteger(totals.output_tokens)} output tokens in the last hour`}
          minutes={minutes}
          series={[
            { label: 'Input tokens', stroke: '#047857', values: column('input_tokens') },
            { label: 'Output tokens', stroke: '#b45309', values: column('output_tokens') },
          ]}
        />
      </div>
      <h2>Spend per model</h2>
      {usage.by_model.length === 0 ? (
        <Empty>No requests in the last hour.</Empty>
      ) : (
        <TableWrap label="Spend per model">
          <table>
            <thead>
              <tr>
                <th scope="col">Model</th>
                <th scope="col">Requests</th>
                <th scope="col">Input tokens</th>
                <th scope="col">Output tokens</th>
                <th scope="col">Spend</th>
              </tr>
            </thead>
            <tbody>
              {usage.by_model.map((row) => (
                <tr key={row.model}>
                  <th scope="row">
                    <code>{row.model}</code>
                  </th>
                  <td>{formatInteger(row.requests)}</td>
                  <td>{formatInteger(row.input_tokens)}</td>
                  <td>{formatInteger(row.output_tokens)}</td>
                  <td>{formatUsd(row.spend)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
      <p class="hint">
        From {formatTime(usage.start)} to {formatTime(usage.end)}.
      </p>
    </>
  );
}
