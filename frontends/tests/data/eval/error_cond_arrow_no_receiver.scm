;; A => clause without its receiver.
;; error: E005 4:7
(cond ((< 1.0 0.0) 2.0)
      (3.0 =>)
      (else 1.0))
