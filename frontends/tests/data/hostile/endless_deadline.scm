;; An endless loop with a huge work budget and a 1 s deadline: time limit exceeded within ~1.2 s.
;; max_steps: 100000000000000
;; deadline_ms: 1000
;; max_ms: 3000
;; expect: E014
(loop ((i 0))
  (recur (+ i 1)))
