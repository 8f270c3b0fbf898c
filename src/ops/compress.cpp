// Contracts of ZeRO++'s wire-format kernels (zt/ops/compress.h): packet sizes and dtypes checked
// here, every tensor on one device, then that device's kernel.
#include "zt/ops/compress.h"

#include "contract.h"

namespace zt::ops {

namespace {

int64_t blocks_of(int64_t n) { return (n + kQuantBlock - 1) / kQuantBlock; }

void check_packet(const Tensor& packet, int64_t n, int bits, const char* op) {
  ZT_CHECK(packet.dtype() == DType::i32 && packet.numel() == packet_words(n, bits) && packet.is_contiguous(), "[", op,
           "] a packet of ", n, " values at ", bits, " bits has ", packet_words(n, bits), " contiguous i32 words, got ",
           packet.numel(), " ", dtype_name(packet.dtype()));
}

void dequantize(const Tensor& packet, int bits, bool accumulate, Tensor& out, const char* op) {
  detail::check_float(out, op);
  detail::check_contiguous(out, op, "the output");
  check_packet(packet, out.numel(), bits, op);
  ZT_RUN(dequantize_blocks, op, out.device(), packet, bits, accumulate, out);
}

}  // namespace

int64_t packet_words(int64_t n, int bits) {
  ZT_CHECK(bits == 4 || bits == 8, "[quantize] quantization takes 4 or 8 bits, got ", bits);
  const int64_t code_bytes = bits == 4 ? (n + 1) / 2 : n;
  return (blocks_of(n) * 4 + code_bytes + 3) / 4;
}

void quantize_into(const Tensor& x, int bits, Tensor packet) {
  detail::check_float(x, "quantize");
  detail::check_contiguous(x, "quantize", "the input");
  check_packet(packet, x.numel(), bits, "quantize");
  ZT_RUN(quantize_blocks, "quantize", x.device(), x, bits, packet);
}

void dequantize_into(const Tensor& packet, int bits, Tensor out) { dequantize(packet, bits, false, out, "dequantize"); }

void dequantize_add(const Tensor& packet, int bits, Tensor acc) {
  ZT_CHECK(acc.dtype() == DType::f32, "[dequantize_add] accumulates into f32, got ", dtype_name(acc.dtype()));
  dequantize(packet, bits, true, acc, "dequantize_add");
}

namespace {
// The sparse rows' arguments: as many f32 rows of C as ids, everything contiguous.
void check_rows(const char* op, const Tensor& ids, const Tensor& rows, int64_t C, const Tensor& out) {
  ZT_CHECK(C > 0 && rows.numel() == ids.numel() * C, "[", op, "] ", ids.numel(), " ids of rows of ", C, " need ",
           ids.numel() * C, " values, got ", rows.numel());
  for (const Tensor* t : {&ids, &rows, &out}) detail::check_contiguous(*t, op, "every tensor");
}
}  // namespace

void average_rows_into(const Tensor& ids, const Tensor& rows, int64_t offset, int64_t V, int64_t C, int64_t dst_begin,
                       float divisor, Tensor out) {
  const char* op = "average_rows";
  ZT_CHECK(ids.dtype() == DType::i32 && rows.dtype() == DType::f32 && out.dtype() == DType::f32, "[", op,
           "] takes i32 ids and f32 rows and output, got ", dtype_name(ids.dtype()), ", ", dtype_name(rows.dtype()),
           ", ", dtype_name(out.dtype()));
  check_rows(op, ids, rows, C, out);
  ZT_RUN(average_rows, op, out.device(), ids, rows, offset, V, C, dst_begin, divisor, out);
}

void add_average_rows_into(const Tensor& ids, const Tensor& rows, int64_t offset, int64_t V, int64_t C,
                           int64_t dst_begin, float divisor, DType wire, Tensor dst) {
  const char* op = "add_average_rows";
  ZT_CHECK(ids.dtype() == DType::i32 && rows.dtype() == DType::f32 && detail::is_float(dst.dtype()) &&
               detail::is_float(wire),
           "[", op, "] takes i32 ids, f32 rows and a float output and wire, got ", dtype_name(ids.dtype()), ", ",
           dtype_name(rows.dtype()), ", ", dtype_name(dst.dtype()), ", ", dtype_name(wire));
  check_rows(op, ids, rows, C, dst);
  ZT_RUN(add_average_rows, op, dst.device(), ids, rows, offset, V, C, dst_begin, divisor, wire, dst);
}

}  // namespace zt::ops
