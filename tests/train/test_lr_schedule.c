// Learning-rate schedules: values at known steps, computed by hand.
#include "app/train/lr_schedule.h"
#include "tests/test_util.h"

#include <math.h>

static int near(double a, double b) { return fabs(a - b) <= 1e-12 * fmax(1.0, fabs(b)); }

int main(void) {
    lr_schedule_t s = {.kind = LR_CONSTANT, .lr = 0.1, .warmup_steps = 4, .steps_per_epoch = 10, .total_steps = 100};
    // Linear warmup: (step + 1) / warmup of the peak, then the peak.
    EXPECT(near(lr_at(&s, 0), 0.025) && near(lr_at(&s, 3), 0.1) && near(lr_at(&s, 50), 0.1), "constant with warmup");

    s = (lr_schedule_t){.kind = LR_WARMUP_EXP, .lr = 0.1, .decay = 0.5, .steps_per_epoch = 10};
    // Halves every epoch (10 steps), continuously.
    EXPECT(near(lr_at(&s, 0), 0.1) && near(lr_at(&s, 10), 0.05) && near(lr_at(&s, 15), 0.1 * pow(0.5, 1.5)),
           "warmup-exp: %g %g", lr_at(&s, 10), lr_at(&s, 15));

    s = (lr_schedule_t){.kind = LR_COSINE, .lr = 1.0, .lr_min = 0.1, .total_steps = 100};
    EXPECT(
        near(lr_at(&s, 0), 1.0) && near(lr_at(&s, 50), 0.55) && near(lr_at(&s, 100), 0.1) && near(lr_at(&s, 150), 0.1),
        "cosine: %g %g %g", lr_at(&s, 0), lr_at(&s, 50), lr_at(&s, 100));

    s = (lr_schedule_t){.kind = LR_CYCLIC, .lr = 1.0, .lr_min = 0.0, .cycle_steps = 10};
    // Triangle: 0 at step 0, 1 at 10, 0 at 20, 0.5 at 25.
    EXPECT(near(lr_at(&s, 0), 0.0) && near(lr_at(&s, 5), 0.5) && near(lr_at(&s, 10), 1.0) && near(lr_at(&s, 20), 0.0) &&
               near(lr_at(&s, 25), 0.5),
           "cyclic: %g %g %g", lr_at(&s, 5), lr_at(&s, 10), lr_at(&s, 25));
    EXPECT(lr_kind_parse("cosine") == LR_COSINE && lr_kind_parse("cyclic") == LR_CYCLIC &&
               lr_kind_parse("warmup-exp") == LR_WARMUP_EXP && lr_kind_parse("constant") == LR_CONSTANT,
           "names");
    return test_report("test_lr_schedule");
}
