;; call/cc is named as unsupported (first-class continuations), at its form.
;; error: E005 4:3
(+ 1.0
  (call/cc (lambda (k) (k 1.0))))
