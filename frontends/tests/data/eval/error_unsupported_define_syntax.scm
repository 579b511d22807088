;; Macros are refused with a clear error at the define-syntax form.
;; error: E005 4:1
(define x 1.0)
(define-syntax swap!
  (syntax-rules () ((_ a b) (let ((t a)) (set! a b) (set! b t)))))
x
