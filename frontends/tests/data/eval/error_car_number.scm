;; car of a number is a type error at the call form.
;; error: E003 4:3
(let ((x 2.0))
  (car x))
