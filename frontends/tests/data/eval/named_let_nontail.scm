;; Named let whose recursive call is not in tail position (lowered to letrec, not loop):
;; 4! · a = 24a = 12 at a = 0.5; d/da = 24.
;; bind: a=0.5
;; expect: 12
;; grad: a=24
(let fact ((n 4))
  (if (= n 0)
      a
      (* n (fact (- n 1)))))
