#include "train/progress.hpp"

#include <cmath>
#include <cstdio>
#include <ostream>

namespace trident {

namespace {

std::string format_duration(double seconds) {
  const long total = std::lround(std::max(0.0, seconds));
  char text[32];
  std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", total / 3600, (total / 60) % 60, total % 60);
  return text;
}

}  // namespace

ProgressPrinter::ProgressPrinter(std::ostream& out, int first_step, int total_steps, int log_every, bool show_bubble)
    : out_(out), first_step_(first_step), total_steps_(total_steps), log_every_(log_every), show_bubble_(show_bubble) {}

void ProgressPrinter::step(const StepRecord& r) {
  elapsed_s_ += r.step_time_s;
  const bool evaluated = std::isfinite(r.val_loss);
  const bool due = r.step == first_step_ + 1 || r.step == total_steps_ || r.step % log_every_ == 0 || evaluated;
  if (!due) return;
  const double eta_s =
      elapsed_s_ / static_cast<double>(r.step - first_step_) * static_cast<double>(total_steps_ - r.step);
  const int width = static_cast<int>(std::to_string(total_steps_).size());
  char bubble[32] = "";
  if (show_bubble_) std::snprintf(bubble, sizeof bubble, " | bubble %5.1f%%", r.bubble * 100.0);
  char val[32] = "";
  if (evaluated) std::snprintf(val, sizeof val, " | val %.4f", r.val_loss);
  char line[352];
  std::snprintf(line, sizeof line,
                "step %*lld/%d | loss %.4f%s | lr %.2e | grad norm %.3f | %8.1f ms | %9.0f tok/s | "
                "%7.1f GFLOP/s | MFU %5.1f%%%s | ETA %s",
                width, static_cast<long long>(r.step), total_steps_, r.loss, val, r.lr, r.grad_norm,
                r.step_time_s * 1e3, r.tokens_per_s, r.achieved_gflops, r.mfu * 100.0, bubble,
                format_duration(eta_s).c_str());
  out_ << line << std::endl;
}

}  // namespace trident
