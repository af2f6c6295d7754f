// Drives the official npm clients of Anthropic, OpenAI and Gemini against
// the ledger's gateway, as an agent in another language would: each
// client is pointed at the gateway by its base URL alone, with its own
// retries off (maxRetries: 0; genai's automatic continuation off), and
// names its session in the X-Ledger-Session-Id header.
//
// Run by e2e/node_test.go, which checks the ledger against the fake
// provider's truth. Environment:
//   GATEWAY_URL  the gateway, e.g. http://127.0.0.1:8088
//   RUN          prefix of the session names
//   CALLS        calls per route
//   IDEM_KEY     an Idempotency-Key for the client-retry case
//   FALLBACK_ID  a request ID for the fallback case: a stream on
//                claude-sonnet-4-5, then, if it fails, the same request
//                on claude-haiku-4-5
// It prints one JSON document: per session, the calls made and those the
// client saw succeed; and the client-retry and fallback cases' outcomes.

import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { GoogleGenAI } from '@google/genai';

const base = process.env.GATEWAY_URL;
const run = process.env.RUN ?? 'node';
const calls = Number(process.env.CALLS ?? '4');
const answer = 'Simulated answer to ';
if (!base) {
  console.error('GATEWAY_URL is not set');
  process.exit(2);
}

const session = (route) => `${run}-${route}`;
const anthropic = (route) =>
  new Anthropic({ baseURL: base, apiKey: 'node-ant-key', maxRetries: 0, defaultHeaders: { 'X-Ledger-Session-Id': session(route) } });
const openai = (route, maxRetries = 0) =>
  new OpenAI({ baseURL: `${base}/v1`, apiKey: 'node-oai-key', maxRetries, defaultHeaders: { 'X-Ledger-Session-Id': session(route) } });
const gemini = (route) =>
  new GoogleGenAI({ apiKey: 'node-gem-key', httpOptions: { baseUrl: base, headers: { 'X-Ledger-Session-Id': session(route) } } });

const messages = [{ role: 'user', content: 'hi' }];

// Each route makes one call and resolves to whether the client saw it
// succeed; a failure (an API error, a broken stream) resolves to false.
const routes = {
  'anthropic': async (c = anthropic('anthropic')) => {
    const m = await c.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 2048, messages });
    return m.content[0].text.includes(answer);
  },
  'anthropic-stream': async (c = anthropic('anthropic-stream')) => {
    const stream = await c.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 2048, messages, stream: true });
    let text = '';
    let stopped = false;
    for await (const ev of stream) {
      if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
      if (ev.type === 'message_stop') stopped = true;
    }
    return stopped && text.includes(answer);
  },
  'openai-chat': async (c = openai('openai-chat')) => {
    const r = await c.chat.completions.create({ model: 'gpt-4.1-mini', messages });
    return r.choices[0].message.content.includes(answer);
  },
  'openai-chat-stream': async (c = openai('openai-chat-stream')) => {
    const stream = await c.chat.completions.create({ model: 'gpt-4.1-mini', messages, stream: true });
    let text = '';
    let finished = false;
    for await (const chunk of stream) {
      if (chunk.usage) throw new Error('a usage chunk the client did not ask for');
      for (const ch of chunk.choices) {
        text += ch.delta?.content ?? '';
        finished ||= ch.finish_reason != null;
      }
    }
    return finished && text.includes(answer);
  },
  'openai-chat-stream-with-usage': async (c = openai('openai-chat-stream-with-usage')) => {
    const stream = await c.chat.completions.create({ model: 'gpt-4.1-mini', messages, stream: true, stream_options: { include_usage: true } });
    let usage = null;
    for await (const chunk of stream) usage = chunk.usage ?? usage;
    return usage !== null && usage.prompt_tokens > 0;
  },
  'openai-responses': async (c = openai('openai-responses')) => {
    const r = await c.responses.create({ model: 'gpt-4.1-mini', input: 'hi' });
    return r.output_text.includes(answer);
  },
  'openai-responses-stream': async (c = openai('openai-responses-stream')) => {
    const stream = await c.responses.create({ model: 'gpt-4.1-mini', input: 'hi', stream: true });
    let done = false;
    for await (const ev of stream) done ||= ev.type === 'response.completed';
    return done;
  },
  'openai-embeddings': async (c = openai('openai-embeddings')) => {
    const r = await c.embeddings.create({ model: 'text-embedding-3-small', input: 'hi' });
    return r.data.length === 1 && r.data[0].embedding.length > 0;
  },
  'gemini': async (c = gemini('gemini')) => {
    const r = await c.models.generateContent({ model: 'gemini-2.5-flash', contents: 'hi', config: { automaticContinuation: false } });
    return r.text.includes(answer);
  },
  'gemini-stream': async (c = gemini('gemini-stream')) => {
    const stream = await c.models.generateContentStream({ model: 'gemini-2.5-flash', contents: 'hi', config: { automaticContinuation: false } });
    let finished = false;
    for await (const chunk of stream) finished ||= (chunk.candidates ?? []).some((cand) => cand.finishReason);
    return finished;
  },
};

const attempt = async (fn) => {
  try {
    return await fn();
  } catch {
    return false;
  }
};

const result = { sessions: {} };
await Promise.all(
  Object.entries(routes).map(async ([route, fn]) => {
    const s = { calls: 0, succeeded: 0 };
    result.sessions[session(route)] = s;
    await Promise.all(
      Array.from({ length: calls }, async () => {
        s.calls++;
        if (await attempt(() => fn())) s.succeeded++;
      }),
    );
  }),
);

// A client that retries on its own (the SDK's retries left on here) with
// one Idempotency-Key: its retry must continue the same request.
if (process.env.IDEM_KEY) {
  const c = openai('idempotency', 2);
  try {
    const r = await c.chat.completions
      .create({ model: 'gpt-4.1-mini', messages }, { headers: { 'Idempotency-Key': process.env.IDEM_KEY } })
      .withResponse();
    result.idempotency = { ok: r.data.choices[0].message.content.includes(answer), request_id: r.response.headers.get('x-ledger-request-id') };
  } catch (e) {
    result.idempotency = { ok: false, error: String(e) };
  }
}

// A client that falls back to another model when its call fails, under
// the same request ID (X-Ledger-Request-Id): one request whose attempts
// ran on two models, each priced at its own.
if (process.env.FALLBACK_ID) {
  const c = anthropic('fallback');
  const headers = { 'X-Ledger-Request-Id': process.env.FALLBACK_ID };
  result.fallback = { first_failed: false, ok: false };
  try {
    const stream = await c.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 2048, messages, stream: true }, { headers });
    for await (const ev of stream) void ev;
  } catch {
    result.fallback.first_failed = true;
  }
  if (result.fallback.first_failed) {
    try {
      const m = await c.messages.create({ model: 'claude-haiku-4-5', max_tokens: 2048, messages }, { headers });
      result.fallback.ok = m.content[0].text.includes(answer);
    } catch (e) {
      result.fallback.error = String(e);
    }
  }
}

console.log(JSON.stringify(result));
