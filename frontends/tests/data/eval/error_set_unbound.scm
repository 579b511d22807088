;; set! of a name that is bound nowhere: the name's position.
;; error: E001 5:9
(let ((y 1.0))
  (set! y 2.0)
  (set! zz y))
