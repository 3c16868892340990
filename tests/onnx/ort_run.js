#!/usr/bin/env node
// Runs an ONNX model qat exported (qat-mnist export --onnx) with
// onnxruntime-node, on the MNIST test set or on float inputs from a file,
// and writes what a comparison with qat's integer engine needs:
//
//   node ort_run.js MODEL.onnx --mnist DIR  --pred FILE --logits FILE [options]
//   node ort_run.js MODEL.onnx --input F32 --shape C,H,W|F --logits FILE [options]
//
//   --mnist DIR        t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz in DIR
//   --input FILE       float32 little-endian inputs, [n, shape] (n follows from the size)
//   --shape S          per-sample input shape for --input (e.g. 2,10,9 or 784)
//   --pred FILE        each sample's predicted label (argmax of the logits), one a line
//   --logits FILE      the float32 logits, [n, K] little-endian
//   --optimized FILE   onnxruntime writes the graph it runs (after its QDQ fusion) here
//   --int8-allowed 0|1 session.qdqisint8allowed (default 1: on x86 onnxruntime
//                      fuses int8-activation Conv/MatMul only when it is set)
//   --batch B          samples per run (default 500)
//   --level L          graph optimization: all (default: QDQ fusion into integer
//                      kernels), basic, extended, or disabled (the graph's float
//                      semantics, each QuantizeLinear/DequantizeLinear run as such)
//
// The MNIST input is normalized exactly as qat does (src/data/mnist.c):
// ((float)p / 255.0f - 0.1307f) / 0.3081f, each step rounded to float32.
// Prints one JSON line: samples, accuracy (with --mnist), seconds, kernels.
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

function usage(msg) {
  process.stderr.write(`ort_run.js: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const a = { batch: 500, int8Allowed: '1', level: 'all' };
  if (argv.length < 1) usage('no model');
  a.model = argv[0];
  for (let i = 1; i < argv.length; i++) {
    const k = argv[i], v = argv[i + 1];
    if (v === undefined) usage(`${k} needs a value`);
    i++;
    if (k === '--mnist') a.mnist = v;
    else if (k === '--input') a.input = v;
    else if (k === '--shape') a.shape = v.split(',').map(Number);
    else if (k === '--pred') a.pred = v;
    else if (k === '--logits') a.logits = v;
    else if (k === '--optimized') a.optimized = v;
    else if (k === '--int8-allowed') a.int8Allowed = v;
    else if (k === '--batch') a.batch = Number(v);
    else if (k === '--level') a.level = v;
    else usage(`unknown option ${k}`);
  }
  if (!a.mnist === !a.input) usage('one of --mnist or --input');
  if (a.input && !a.shape) usage('--input needs --shape');
  return a;
}

// An IDX file (gzip): its dimensions and its bytes.
function readIdx(file) {
  const b = zlib.gunzipSync(fs.readFileSync(file));
  if (b.readUInt16BE(0) !== 0 || b[2] !== 0x08) throw new Error(`${file}: not an IDX file of bytes`);
  const rank = b[3], dims = [];
  for (let d = 0; d < rank; d++) dims.push(b.readUInt32BE(4 + 4 * d));
  const n = dims.reduce((x, y) => x * y, 1), off = 4 + 4 * rank;
  if (b.length !== off + n) throw new Error(`${file}: ${b.length - off} data bytes, dimensions say ${n}`);
  return { dims, data: b.subarray(off) };
}

// qat's lookup table: every step in float32, as C computes it.
function mnistTable() {
  const f = Math.fround, mean = f(0.1307), std = f(0.3081), lut = new Float32Array(256);
  for (let v = 0; v < 256; v++) lut[v] = f(f(f(v) / f(255)) - mean) / std;
  return lut;
}

function loadData(a) {
  if (a.mnist) {
    const img = readIdx(path.join(a.mnist, 't10k-images-idx3-ubyte.gz'));
    const lab = readIdx(path.join(a.mnist, 't10k-labels-idx1-ubyte.gz'));
    const [n, rows, cols] = img.dims, lut = mnistTable(), x = new Float32Array(n * rows * cols);
    for (let i = 0; i < x.length; i++) x[i] = lut[img.data[i]];
    return { n, per: rows * cols, x, labels: lab.data };
  }
  const per = a.shape.reduce((x, y) => x * y, 1), raw = fs.readFileSync(a.input);
  if (raw.length % (4 * per)) usage(`${a.input}: not a whole number of samples of ${per} floats`);
  const n = raw.length / (4 * per), x = new Float32Array(n * per);
  for (let i = 0; i < x.length; i++) x[i] = raw.readFloatLE(4 * i);
  return { n, per, x, labels: null };
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const ort = require('onnxruntime-node');
  const opts = {
    graphOptimizationLevel: a.level,
    intraOpNumThreads: 1,
    logSeverityLevel: 3, // errors only: not the warning that the optimized model is hardware-specific
    extra: { session: { qdqisint8allowed: a.int8Allowed } },
  };
  if (a.optimized) opts.optimizedModelFilePath = a.optimized;
  const session = await ort.InferenceSession.create(a.model, opts);
  const d = loadData(a);
  // the model's input rank says how a sample is laid out: [N, C, H, W] or [N, F]
  const meta = session.inputMetadata ? session.inputMetadata[0] : null;
  let shape = a.shape;
  if (!shape) shape = meta && meta.shape && meta.shape.length === 2 ? [d.per] : [1, 28, 28];
  const pred = new Int32Array(d.n);
  let logits = null, K = 0, correct = 0;
  const t0 = process.hrtime.bigint();
  for (let s = 0; s < d.n; s += a.batch) {
    const b = Math.min(a.batch, d.n - s);
    const x = new ort.Tensor('float32', d.x.subarray(s * d.per, (s + b) * d.per), [b, ...shape]);
    const out = (await session.run({ [session.inputNames[0]]: x }))[session.outputNames[0]];
    K = out.dims[1];
    if (!logits) logits = new Float32Array(d.n * K);
    logits.set(out.data, s * K);
    for (let i = 0; i < b; i++) {
      let best = 0;
      for (let k = 1; k < K; k++) if (out.data[i * K + k] > out.data[i * K + best]) best = k;
      pred[s + i] = best;
      if (d.labels && best === d.labels[s + i]) correct++;
    }
  }
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  if (a.pred) fs.writeFileSync(a.pred, Array.from(pred).join('\n') + '\n');
  if (a.logits) fs.writeFileSync(a.logits, Buffer.from(logits.buffer, logits.byteOffset, logits.byteLength));
  const summary = { model: a.model, samples: d.n, classes: K, seconds: secs, onnxruntime: ort.env.versions.node };
  if (d.labels) summary.accuracy = correct / d.n;
  console.log(JSON.stringify(summary));
}

main().catch((e) => {
  process.stderr.write(`ort_run.js: ${e && e.message ? e.message : e}\n`);
  process.exit(1);
});
