// A receiver for Tollway's turn-complete webhooks, on plain node:http. It checks the bearer
// token when WEBHOOK_TOKEN is set (the `token` of your WebhookSpec), verifies the Standard
// Webhooks signature when WEBHOOK_SIGNING_SECRET is set (the session service's `whsec_…`
// secret), and validates the body with the WebhookPayload schema.
import { timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import { WebhookPayload } from '@tollway/contracts';
import { Webhook } from 'standardwebhooks';

const token = process.env.WEBHOOK_TOKEN;
const signer = process.env.WEBHOOK_SIGNING_SECRET ? new Webhook(process.env.WEBHOOK_SIGNING_SECRET) : null;

function sameText(a, b) {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

const server = createServer(async (req, res) => {
  if (req.method !== 'POST') return res.writeHead(405).end();
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const body = Buffer.concat(chunks).toString('utf8');

  if (token && !sameText(req.headers.authorization ?? '', `Bearer ${token}`)) return res.writeHead(401).end();
  if (signer) {
    try {
      signer.verify(body, req.headers); // webhook-id, webhook-timestamp, webhook-signature
    } catch {
      return res.writeHead(401).end();
    }
  }

  let json;
  try {
    json = JSON.parse(body);
  } catch {
    return res.writeHead(400).end();
  }
  const parsed = WebhookPayload.safeParse(json);
  if (!parsed.success) {
    res.writeHead(400, { 'content-type': 'application/json' });
    return res.end(
      JSON.stringify({ issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })) }),
    );
  }

  const payload = parsed.data; // typed: WebhookPayload
  if (payload.status === 'idle') console.log(`session ${payload.session_id} answered: ${payload.response?.content}`);
  else console.log(`session ${payload.session_id} failed: ${payload.error}`);
  res.writeHead(204).end();
});

server.listen(Number(process.env.PORT ?? 3000), () => console.log(`listening on ${server.address().port}`));
