/* The C API (flashgen.h) on the CPU backend: a forward with every value row
 * equal, so the output must equal that row whatever the softmax weights are,
 * and a call with a bad argument, whose message names it. */
#include <flashgen/flashgen.h>
#include <math.h>
#include <stdio.h>

enum { B = 1, S = 17, H = 3, D = 12, DV = 5 };

/* A packed [batch, seq, heads, dim] f32 tensor in host memory. */
static fg_tensor packed(float* data, int64_t dim) {
  fg_tensor t = {0};
  t.data = data;
  t.dtype = FG_F32;
  t.memory = FG_HOST;
  t.shape[0] = B, t.shape[1] = S, t.shape[2] = H, t.shape[3] = dim;
  t.stride[3] = 1, t.stride[2] = dim, t.stride[1] = H * dim, t.stride[0] = S * H * dim;
  return t;
}

int main(void) {
  static float q[B * S * H * D], k[B * S * H * D], v[B * S * H * DV], o[B * S * H * DV];
  for (int i = 0; i < B * S * H * D; ++i) q[i] = sinf(0.3f * i), k[i] = cosf(0.7f * i);
  for (int i = 0; i < B * S * H * DV; ++i) v[i] = (float)(i % (H * DV)); /* same for every key */
  fg_tensor tq = packed(q, D), tk = packed(k, D), tv = packed(v, DV), to = packed(o, DV);

  fg_options options;
  fg_options_init(&options);
  options.backend = FG_BACKEND_CPU;
  if (fg_forward(&tq, &tk, &tv, &to, NULL, &options) != FG_OK) {
    fprintf(stderr, "flashgen: %s\n", fg_last_error());
    return 1;
  }
  double error = 0;
  for (int i = 0; i < B * S * H * DV; ++i) error = fmax(error, fabs(o[i] - v[i]));

  /* o's head dim disagrees with v's: refused with a message, o untouched. */
  fg_tensor wrong = packed(o, DV - 1);
  const int status = fg_forward(&tq, &tk, &tv, &wrong, NULL, &options);
  printf("flashgen %s: max |O - V| = %.2e; a wrong o gives status %d: %s\n", fg_version(), error,
         status, fg_last_error());
  const int ok = error < 1e-5 && status == FG_INVALID_ARGUMENT && fg_last_error()[0] != '\0';
  printf("%s\n", ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
