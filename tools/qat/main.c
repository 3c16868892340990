/* qat: train quantized models on your data, export their integers, run
 * and inspect them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dist.h"
#include "tools.h"

static const char *const usage =
    "usage: qat COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  train    train a model on a data set (HDF5, .npy or IDX; MNIST by default), float\n"
    "           or with --qat fake quantization\n"
    "  export   turn a QAT training checkpoint into a quantized model (HDF5; --onnx: ONNX;\n"
    "           --c: C for microcontrollers)\n"
    "  eval     run a quantized model on a data set (int, hybrid or fake engine): the\n"
    "           task's metrics\n"
    "  summary  a model's layers or ops: parameters, MACs, quantization, memory\n"
    "  analyze  which quantization points cost accuracy (SQNR, clipping), ranked\n"
    "  fit      choose each layer's weight bits to fit a device's flash and RAM, fine-tune,\n"
    "           export the C and check it on the linked firmware\n"
    "  plot     draw a training log (train --log) as PNG pictures (gnuplot)\n"
    "  info     the instruction-set levels and BLAS kernels this machine runs, and a better\n"
    "           BLAS choice if there is one\n"
    "\n"
    "`qat COMMAND --help` describes each command's options; `qat --version` the version.\n";

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) return printf("qat %s\n", qat_version()), 0;
    qat_isa cap;
    if (qat_isa_cap(&cap) != QAT_OK) {
        fprintf(stderr, "qat: QAT_MAX_ISA=\"%s\" names no instruction-set level (portable, avx2, avx_vnni, avx512, "
                        "avx512_vnni)\n", getenv("QAT_MAX_ISA"));
        return EXIT_USAGE;
    }
    if (!strcmp(argv[1], "train")) return cmd_train(argc - 1, argv + 1);
    static const char *const others[] = {"export", "eval", "info", "summary", "analyze", "plot", "fit", NULL};
    bool help = argc > 2 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"));
    int ranks = dist_launched_ranks();
    if (ranks > 1 && !help && cli_choice(argv[1], others) >= 0) { /* each process would run it all, write the same files */
        fprintf(stderr, "qat %s: only train runs as an MPI job (here %d processes would each run it): run qat %s "
                        "without mpirun\n", argv[1], ranks, argv[1]);
        return EXIT_USAGE;
    }
    if (!strcmp(argv[1], "export")) return cmd_export(argc - 1, argv + 1);
    if (!strcmp(argv[1], "eval")) return cmd_eval(argc - 1, argv + 1);
    if (!strcmp(argv[1], "info")) return cmd_info(argc - 1, argv + 1);
    if (!strcmp(argv[1], "summary")) return cmd_summary(argc - 1, argv + 1);
    if (!strcmp(argv[1], "analyze")) return cmd_analyze(argc - 1, argv + 1);
    if (!strcmp(argv[1], "plot")) return cmd_plot(argc - 1, argv + 1);
    if (!strcmp(argv[1], "fit")) return cmd_fit(argc - 1, argv + 1);
    fprintf(stderr, "qat: unknown command \"%s\" (qat --help lists the commands)\n", argv[1]);
    return EXIT_USAGE;
}
