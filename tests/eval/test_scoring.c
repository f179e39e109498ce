// Scoring: EER and minDCF against hand-computed cases, AS-norm statistics against a direct
// computation, cosine basics.
#include "app/eval/scoring.h"
#include "tests/test_util.h"

#include <math.h>
#include <stdlib.h>

int main(void) {
    // Perfect separation: EER 0, minDCF 0.
    float s1[] = {0.1f, 0.2f, 0.3f, 0.8f, 0.9f};
    uint8_t t1[] = {0, 0, 0, 1, 1};
    EXPECT(fabs(score_eer(s1, t1, 5)) < 1e-12, "separable EER %g", score_eer(s1, t1, 5));
    EXPECT(fabs(score_min_dcf(s1, t1, 5, 0.01)) < 1e-12, "separable minDCF");
    // Fully reversed: EER 1 (every threshold errs on everything once rates cross at 1).
    uint8_t t2[] = {1, 1, 1, 0, 0};
    EXPECT(fabs(score_eer(s1, t2, 5) - 1.0) < 1e-12, "reversed EER %g", score_eer(s1, t2, 5));
    // One target below one nontarget out of 2+2: thresholds give (Pmiss, Pfa) =
    // (0,1) (0,.5) (.5,.5) (.5,0) (1,0) -> EER 0.5 exactly at the middle point.
    float s3[] = {0.1f, 0.2f, 0.3f, 0.4f};
    uint8_t t3[] = {0, 1, 0, 1};
    EXPECT(fabs(score_eer(s3, t3, 4) - 0.5) < 1e-12, "interleaved EER %g", score_eer(s3, t3, 4));
    // 4 targets, 4 nontargets, one nontarget above one target:
    // scores: n .1, n .2, n .3, t .4, n .5, t .6, t .7, t .8
    // threshold between .4 and .5: Pmiss = 1/4, Pfa = 1/4 -> EER 0.25.
    float s4[] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
    uint8_t t4[] = {0, 0, 0, 1, 0, 1, 1, 1};
    EXPECT(fabs(score_eer(s4, t4, 8) - 0.25) < 1e-12, "EER %g want 0.25", score_eer(s4, t4, 8));
    // minDCF at p = 0.5 is min over thresholds of (Pmiss + Pfa) / 2 / 0.5 = Pmiss + Pfa = 0.25
    // (threshold above .3: Pmiss 0, Pfa 1/4; or above .5: Pmiss 1/4, Pfa 0).
    EXPECT(fabs(score_min_dcf(s4, t4, 8, 0.5) - 0.25) < 1e-12, "minDCF %g", score_min_dcf(s4, t4, 8, 0.5));
    // p = 0.01: accepting everything costs 0.99 * 1 / 0.01; rejecting all costs 0.01 * 1 / 0.01 = 1;
    // threshold above .5 costs (0.01 * 0.25 + 0) / 0.01 = 0.25; above .3: 0.99 * 0.25 / 0.01.
    EXPECT(fabs(score_min_dcf(s4, t4, 8, 0.01) - 0.25) < 1e-12, "minDCF(0.01) %g", score_min_dcf(s4, t4, 8, 0.01));
    // Ties are stepped over together: equal target/nontarget scores cannot be split.
    float s5[] = {0.5f, 0.5f};
    uint8_t t5[] = {0, 1};
    EXPECT(fabs(score_eer(s5, t5, 2) - 0.5) < 1e-12, "tied EER %g", score_eer(s5, t5, 2));

    // A NaN score (a diverged model's embedding): no threshold can step over it. NaN out,
    // not a walk past the end of the curve.
    float s6[] = {0.1f, NAN, 0.3f, 0.4f};
    uint8_t t6[] = {0, 1, 0, 1};
    EXPECT(isnan(score_eer(s6, t6, 4)) && isnan(score_min_dcf(s6, t6, 4, 0.01)), "NaN score: EER %g",
           score_eer(s6, t6, 4));
    // One class only: NaN, the caller refuses such lists (io/scores/trials.h).
    uint8_t t7[] = {1, 1, 1, 1};
    EXPECT(isnan(score_eer(s3, t7, 4)), "targets only: EER %g", score_eer(s3, t7, 4));

    // Cosine.
    float a[] = {1, 0, 0}, b[] = {0, 2, 0}, c[] = {3, 0, 0};
    EXPECT(fabsf(score_cosine(a, b, 3)) < 1e-7f && fabsf(score_cosine(a, c, 3) - 1) < 1e-7f, "cosine");

    // AS-norm statistics: top-2 of the cohort scores, against direct computation.
    float emb[] = {1, 0, 0.6f, 0.8f};                  // 2 embeddings, d = 2 (unit rows)
    float cohort[] = {1, 0, 0, 1, -1, 0, 0.8f, 0.6f};  // 4 cohort rows
    float mean[2], std[2];
    score_cohort_stats(emb, 2, cohort, 4, 2, 2, mean, std);
    // emb0 scores: 1, 0, -1, 0.8 -> top2 {1, .8}: mean .9, std .1
    // emb1 scores: .6, .8, -.6, .96 -> top2 {.96, .8}: mean .88, std .08
    EXPECT(fabsf(mean[0] - 0.9f) < 1e-6f && fabsf(std[0] - 0.1f) < 1e-6f, "cohort stats 0: %g %g", mean[0], std[0]);
    EXPECT(fabsf(mean[1] - 0.88f) < 1e-6f && fabsf(std[1] - 0.08f) < 1e-6f, "cohort stats 1: %g %g", mean[1], std[1]);
    EXPECT(fabsf(score_asnorm(1.0f, 0.9f, 0.1f, 0.88f, 0.08f) - 0.5f * (1.0f + 1.5f)) < 1e-5f, "asnorm");
    return test_report("test_scoring");
}
