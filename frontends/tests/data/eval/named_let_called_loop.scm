;; The named let LLMs write most, named `loop` like the special form: tail calls of the name are
;; the loop's recur. Sum of a·i² for i = 1..4 = 30a = 15 at a = 0.5; d/da = 30.
;; bind: a=0.5
;; expect: 15
;; grad: a=30
(let loop ((i 1) (acc 0.0))
  (if (> i 4)
      acc
      (loop (+ i 1) (+ acc (* a i i)))))
