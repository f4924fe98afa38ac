// Reads a session stream in its AI SDK form the way an `ai` 6 client does: fetch, then the
// SDK's parseJsonEventStream with uiMessageChunkSchema, piped into readUIMessageStream.
//
//   node read_ui_message_stream.mjs URL COUNT [HEADERS_JSON]
//
// Each message snapshot the reader yields with a data-plan part prints one JSON line
// {id, parts}; after COUNT of them the stream is cancelled. Chunks the schema refused print
// {"invalid": ...}; an `error` chunk prints {"error": ...}; a failed fetch {"status", "body"}.
import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } from "ai";

const [url, count, headersJson = "{}"] = process.argv.slice(2);
const print = (value) => process.stdout.write(JSON.stringify(value) + "\n");

const response = await fetch(url, { headers: JSON.parse(headersJson) });
if (!response.ok) {
  print({ status: response.status, body: await response.text() });
  process.exit(0);
}
const chunks = parseJsonEventStream({
  stream: response.body,
  schema: uiMessageChunkSchema(),
}).pipeThrough(
  new TransformStream({
    transform(result, controller) {
      if (result.success) controller.enqueue(result.value);
      else print({ invalid: String(result.error).slice(0, 300) });
    },
  }),
);

let plans = 0;
const messages = readUIMessageStream({
  stream: chunks,
  onError: (error) => print({ error: String(error?.message ?? error) }),
});
for await (const message of messages) {
  if (!message.parts.some((part) => part.type === "data-plan")) continue;
  print({ id: message.id, parts: message.parts });
  plans += 1;
  if (plans >= Number(count)) break; // leaving the loop cancels the stream
}
print({ done: plans });
process.exit(0);
