/**
 * One raw HTTP/1.1 request on a connection of its own, for what fetch will not send: both framings
 * at once, a body shorter than its Content-Length, a Host of the caller's choosing.
 *
 *     const answer = await rawHttp(url, "PUT", [["Content-Length", "10"]], "abc");
 *     statusOf(answer);   // 422
 */
import { connect } from "node:net";

/** The whole answer as text (status line, headers, body), read until the server closes. */
export function rawHttp(url: URL, method: string, headers: [string, string][], body = ""): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => {
      const lines = [`${method} ${url.pathname}${url.search} HTTP/1.1`, ...(headers.some(([name]) => name.toLowerCase() === "host") ? [] : [`Host: ${url.host}`]), "Connection: close"];
      socket.end(`${[...lines, ...headers.map(([name, value]) => `${name}: ${value}`)].join("\r\n")}\r\n\r\n${body}`);
    });
    let text = "";
    socket.setEncoding("utf8");
    socket.setTimeout(20_000, () => socket.destroy(new Error("no answer within 20 s")));
    socket.on("data", (chunk: string) => (text += chunk));
    socket.on("end", () => resolve(text));
    socket.on("error", reject);
  });
}

/** An answer's status code; 0 when the server closed without one. */
export const statusOf = (answer: string) => Number(/^HTTP\/1\.1 (\d{3}) /.exec(answer)?.[1] ?? 0);

/** An answer's JSON body. */
export const jsonOf = (answer: string): Record<string, unknown> => JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) as Record<string, unknown>;
