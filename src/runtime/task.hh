#pragma once
// A move-only, type-erased `void()` callable: the unit of work that cores pass
// to each other through mailboxes and that timers fire. std::function needs
// copyable targets and std::move_only_function is C++23, hence our own.

#include <memory>
#include <type_traits>
#include <utility>

namespace ic::runtime {

class Task {
 public:
  Task() = default;

  // Wraps any move-constructible callable invocable as `void()`.
  template <typename F>
  requires(!std::is_same_v<std::decay_t<F>, Task> && std::is_invocable_v<std::decay_t<F>&>)
      Task(F&& f)  // NOLINT(google-explicit-constructor): tasks are built from lambdas inline
      : impl_(std::make_unique<Model<std::decay_t<F>>>(std::forward<F>(f))) {}

  Task(Task&&) noexcept = default;
  Task& operator=(Task&&) noexcept = default;

  // Runs the callable. Precondition: not empty.
  void operator()() { impl_->call(); }
  explicit operator bool() const { return impl_ != nullptr; }
  // Moves the wrapped callable back out (the task becomes empty).
  // Precondition: this task was built from an `F` (runtime/submit.hh hands a
  // refused callable back to its caller this way).
  template <typename F>
  F take() && {
    F f = std::move(static_cast<Model<F>&>(*impl_).fn);
    impl_.reset();
    return f;
  }

 private:
  struct Concept {
    virtual ~Concept() = default;
    virtual void call() = 0;
  };
  template <typename F>
  struct Model final : Concept {
    explicit Model(F&& f) : fn(std::move(f)) {}
    explicit Model(const F& f) : fn(f) {}
    void call() override { fn(); }
    F fn;
  };
  std::unique_ptr<Concept> impl_;
};

}  // namespace ic::runtime
