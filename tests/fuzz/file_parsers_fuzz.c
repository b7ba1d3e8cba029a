/* libFuzzer target for the file parsers of src/io: every input is parsed as a JSON header
 * (dt_json_parse), as a safetensors file and as a .npy file (the loaders read paths, so the
 * input goes through a file in a private temporary directory).  A crash, a sanitizer report
 * or a leak is a finding; an error status is the expected answer to a corrupt file.
 * Built and run by tests/fuzz/file_parsers_fuzz.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "io/json.h"
#include "io/npy.h"
#include "io/safetensors.h"

static char path[4096];

static void write_input(const uint8_t *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f) abort(); /* the harness itself failed, not the parser */
  if (size && fwrite(data, 1, size, f) != size) abort();
  fclose(f);
}

static void remove_input(void) { unlink(path); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  const char *tmp = getenv("TMPDIR");
  char dir[4000];
  snprintf(dir, sizeof dir, "%s/dtlua_fuzz_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) abort();
  snprintf(path, sizeof path, "%s/input", dir);
  atexit(remove_input);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dt_json *j = NULL;
  if (dt_json_parse((const char *)data, size, &j) == DT_OK) dt_json_free(j);
  write_input(data, size);
  dt_safetensors st;
  memset(&st, 0, sizeof st);
  if (dt_safetensors_load(path, &st) == DT_OK) dt_safetensors_free(&st);
  dt_tensor *t = dt_npy_load(path);
  if (t) dt_tensor_release(t);
  return 0;
}
