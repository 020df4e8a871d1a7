// Make the page's Pyodide memory snapshot (node web/snapshot.mjs DIST APP_ZIP OUT): Pyodide booted, vrambudget's
// zip unpacked and its page module imported, the README's main question answered once (every module the answer
// needs imported), then the wasm memory written gzip-compressed to OUT. The page restores it instead of booting
// Python and importing the package again (web/app.js); its files come back by unpacking the zip once more.
import { readFileSync, writeFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { pathToFileURL } from "node:url";

const [dist, appZip, out] = process.argv.slice(2);
const { loadPyodide } = await import(pathToFileURL(`${dist}/pyodide/pyodide.mjs`).href);
const py = await loadPyodide({ indexURL: `${dist}/pyodide/`, _makeSnapshot: true });
py.unpackArchive(new Uint8Array(readFileSync(`${dist}/${appZip}`)), "zip", { extractDir: "/app" });
py.runPython(`
import sys, json
sys.path.insert(0, '/app')
import vrambudget_web
for answer in (vrambudget_web.catalog(), vrambudget_web.predict(json.dumps({"gpu": "rtx4060ti"}))):
    if "error" in json.loads(answer):
        raise SystemExit(answer)
del answer
`);
const snap = py.makeMemorySnapshot();
writeFileSync(out, gzipSync(snap, { level: 6 }));
console.log(`snapshot ${snap.length} bytes, ${out}`);
