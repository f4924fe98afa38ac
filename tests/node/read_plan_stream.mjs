// Reads UI message stream chunks (a JSON array on stdin) the way an AI SDK 6 client does:
// each chunk is validated with the SDK's own uiMessageChunkSchema, then the chunks are sent as
// an SSE stream through parseJsonEventStream into readUIMessageStream. Prints
// {"invalid": [...], "parts": [...]}: the chunks the schema refused (with why) and the parts of
// the last message the reader built.
import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } from "ai";

const chunks = JSON.parse(await new Response(process.stdin).text());
const schema = uiMessageChunkSchema();

const invalid = [];
for (const [index, chunk] of chunks.entries()) {
  const result = await schema.validate(chunk);
  if (!result.success) invalid.push({ index, error: String(result.error).slice(0, 300) });
}

const sse = chunks.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`).join("");
const parsed = parseJsonEventStream({
  stream: new Response(sse).body,
  schema: uiMessageChunkSchema(),
}).pipeThrough(
  new TransformStream({
    transform(result, controller) {
      if (result.success) controller.enqueue(result.value);
      else invalid.push({ index: "sse", error: String(result.error).slice(0, 300) });
    },
  }),
);

let message = { parts: [] };
for await (const snapshot of readUIMessageStream({ stream: parsed, terminateOnError: true })) {
  message = snapshot;
}
process.stdout.write(JSON.stringify({ invalid, parts: message.parts }));
