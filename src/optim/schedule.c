/* Learning-rate schedules in closed form: warm-up, then step or cosine. */
#include <math.h>

#include "qat/optim.h"

float qat_lr_at(const qat_lr_schedule *s, int64_t step) {
    if (!s) return 0.0f;
    if (step < 0) step = 0;
    double lr = s->base_lr;
    switch (s->kind) {
    case QAT_LR_STEP:
        if (s->step_size > 0) lr *= pow(s->gamma, (double)(step / s->step_size));
        break;
    case QAT_LR_COSINE:
        if (s->total_steps > 0) {
            int64_t t = step < s->total_steps ? step : s->total_steps;
            lr = s->min_lr + (s->base_lr - s->min_lr) *
                                 (1.0 + cos(3.14159265358979323846 * (double)t / (double)s->total_steps)) / 2.0;
        }
        break;
    case QAT_LR_CONSTANT:
        break;
    }
    if (s->warmup_steps > 0 && step < s->warmup_steps) {
        double f = s->warmup_start + (1.0 - s->warmup_start) * (double)step / (double)s->warmup_steps;
        lr *= f;
    }
    return (float)lr;
}
