;; Consing in an endless loop: the periodic memory check stops it (E013) before the work budget.
;; expect: E013|E007
(loop ((acc '()))
  (recur (cons 1.0 acc)))
