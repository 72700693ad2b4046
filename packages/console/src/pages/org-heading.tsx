import type { Organization } from '@tollway/contracts';
import type { RefObject } from 'preact';
import { href } from '../router';
import type { Resource } from '../use-resource';

/**
 * The heading of an organization's pages, with its name and links between its keys and usage.
 * The page loads the organization (the usage page refreshes it for its live counts).
 */
export function OrgHeading(props: {
  org: Resource<Organization>;
  orgId: string;
  page: 'keys' | 'usage';
  operator: boolean;
  heading: RefObject<HTMLHeadingElement>;
}) {
  const { org } = props;
  const title = props.page === 'keys' ? 'API keys' : 'Usage';
  return (
    <>
      {props.operator && (
        <p class="crumbs">
          <a href={href({ page: 'organizations' })}>Organizations</a>
          {' / '}
          <a href={href({ page: props.page === 'keys' ? 'usage' : 'keys', orgId: props.orgId })}>
            {props.page === 'keys' ? 'Usage' : 'Keys'} of this organization
          </a>
        </p>
      )}
      <h1 ref={props.heading} tabIndex={-1}>
        {title}
        <span class="sub">{org.data ? `${org.data.name} (${org.data.id})` : props.orgId}</span>
      </h1>
      {org.error && (
        <p class="form-error" role="alert">
          {org.error}
        </p>
      )}
    </>
  );
}
