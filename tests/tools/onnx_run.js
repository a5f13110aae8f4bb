// onnx_run.js - runs an ONNX model written by onnx-export in ONNX Runtime
// (npm's onnxruntime-node, CPU execution provider) for test_onnx_export.c.
//
//   node onnx_run.js --probe                   exit 0 when onnxruntime-node loads, 77 with the reason
//   node onnx_run.js MODEL.onnx IN.bin N OUT.bin
//
// IN.bin: float32 little-endian, planes (N, P, 9, 9) then hand (N, H) (P and H
// from the model's input shapes). OUT.bin: policy (N, 2187), value (N, 3),
// legal (N, 2187), float32. The positions go through in batches of 1, 3, 64, 64, ...
// (the batch dimension is dynamic).
//
// onnxruntime-node is found by require() (NODE_PATH, a node_modules above this
// file), then under $KOMA_ORT_DIR/node_modules, then in npm's global folder
// (`npm root -g`). Exit 77 (ctest's skip) with the reason when it is nowhere.
'use strict';
const fs = require('fs');
const path = require('path');

function loadOrt() {
  const tries = ['onnxruntime-node'];
  if (process.env.KOMA_ORT_DIR) tries.push(path.join(process.env.KOMA_ORT_DIR, 'node_modules', 'onnxruntime-node'));
  try {
    const root = require('child_process').execSync('npm root -g', {stdio: ['ignore', 'pipe', 'ignore']}).toString().trim();
    if (root) tries.push(path.join(root, 'onnxruntime-node'));
  } catch (e) { /* no npm: the other places only */ }
  const errors = [];
  for (const t of tries) {
    try {
      const ort = require(t);
      let version = '?';
      try { version = require(path.join(path.dirname(require.resolve(t)), '..', 'package.json')).version; } catch (e) {}
      return {ort, version, where: t};
    } catch (e) {
      errors.push(t + ': ' + String(e.message).split('\n')[0]);
    }
  }
  console.log('skip: onnxruntime-node not found (npm install onnxruntime-node into a folder and set KOMA_ORT_DIR ' +
              'to it, or tools/deps.sh --test); tried ' + errors.join('; '));
  process.exit(77);
}

async function main() {
  const {ort, version, where} = loadOrt();
  if (process.argv[2] === '--probe') {
    console.log('onnxruntime-node ' + version + ' (' + where + ')');
    return;
  }
  const [model, inPath, nStr, outPath] = process.argv.slice(2);
  const N = parseInt(nStr, 10);
  const session = await ort.InferenceSession.create(model, {executionProviders: ['cpu']});
  const meta = {};
  for (const m of session.inputMetadata || []) meta[m.name] = m;
  const buf = fs.readFileSync(inPath);
  const all = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
  const hasHand = session.inputNames.includes('hand');
  // P and H from the file's size: N*(P*81 + H) floats, P and H as the model says (68, 14 for Koma's encoding)
  let P = 68, H = hasHand ? 14 : 0;
  if (meta.planes && Array.isArray(meta.planes.shape)) P = meta.planes.shape[1];
  if (hasHand && meta.hand && Array.isArray(meta.hand.shape)) H = meta.hand.shape[1];
  if (all.length !== N * (P * 81 + H)) throw new Error(inPath + ': ' + all.length + ' floats, want ' + N * (P * 81 + H));
  const planes = all.subarray(0, N * P * 81), hand = all.subarray(N * P * 81);
  const out = {policy: new Float32Array(N * 2187), value: new Float32Array(N * 3), legal: new Float32Array(N * 2187)};
  const sizes = [1, 3];
  for (let b = 0; b < N;) {
    const n = Math.min(sizes.length ? sizes.shift() : 64, N - b);
    const feeds = {planes: new ort.Tensor('float32', planes.slice(b * P * 81, (b + n) * P * 81), [n, P, 9, 9])};
    if (hasHand) feeds.hand = new ort.Tensor('float32', hand.slice(b * H, (b + n) * H), [n, H]);
    const r = await session.run(feeds);
    for (const k of ['policy', 'value', 'legal']) {
      const w = k === 'value' ? 3 : 2187;
      if (r[k].dims.length !== 2 || r[k].dims[0] !== n || r[k].dims[1] !== w)
        throw new Error(k + ': dims ' + JSON.stringify(r[k].dims) + ', want [' + n + ',' + w + ']');
      out[k].set(r[k].data, b * w);
    }
    b += n;
  }
  const o = Buffer.concat([out.policy, out.value, out.legal].map(a => Buffer.from(a.buffer, a.byteOffset, a.byteLength)));
  fs.writeFileSync(outPath, o);
  console.log('onnxruntime-node ' + version + ': ' + N + ' positions through ' + path.basename(model));
}

main().catch(e => { console.error('onnx_run.js: ' + (e && e.stack || e)); process.exit(1); });
