import type { RefObject } from 'preact';
import { api } from '../api';
import { Empty, ErrorNote, Loading, TableWrap } from '../components/status';
import { formatInteger, formatUsd } from '../format';
import { useResource } from '../use-resource';

/** The model catalog: engine kind, replica health, capacity in use, prices. */
export function ModelsPage({ heading }: { heading: RefObject<HTMLHeadingElement> }) {
  const models = useResource(() => api.models(), [], 15_000);
  return (
    <>
      <h1 ref={heading} tabIndex={-1}>
        Models
      </h1>
      {models.loading && !models.data && <Loading what="models" />}
      {models.error && <ErrorNote message={models.error} onRetry={models.reload} />}
      {models.data && models.data.data.length === 0 && <Empty>The catalog has no models.</Empty>}
      {models.data && models.data.data.length > 0 && (
        <TableWrap label="Models">
          <table>
            <thead>
              <tr>
                <th scope="col">Model</th>
                <th scope="col">Engine</th>
                <th scope="col">Replicas</th>
                <th scope="col">Capacity in use</th>
                <th scope="col">Input / 1M tokens</th>
                <th scope="col">Output / 1M tokens</th>
              </tr>
            </thead>
            <tbody>
              {models.data.data.map((model) => {
                const healthy = model.replicas.filter((r) => r.healthy).length;
                return (
                  <tr key={model.id}>
                    <th scope="row">
                      <code>{model.id}</code>
                      <span class="sub">owned by {model.owned_by}</span>
                    </th>
                    <td>{model.engine_kind}</td>
                    <td>
                      <span class={healthy === model.replicas.length ? 'ok' : 'negative'}>
                        {healthy} of {model.replicas.length} healthy
                      </span>
                      <ul class="replicas">
                        {model.replicas.map((r) => (
                          <li key={r.index}>
                            Replica {r.index}: {r.healthy ? 'healthy' : 'not answering'}
                          </li>
                        ))}
                      </ul>
                    </td>
                    <td>
                      {formatInteger(model.capacity_in_use)}
                      {' of '}
                      {model.capacity === null ? 'unlimited' : formatInteger(model.capacity)}
                    </td>
                    <td>{formatUsd(model.price_per_million.input)}</td>
                    <td>{formatUsd(model.price_per_million.output)}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </TableWrap>
      )}
    </>
  );
}
