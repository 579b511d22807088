;; A non-differentiated input sets the trip count: sum_{i<n} a*i = a n(n-1)/2 = 2 * 10 = 20 at n = 5;
;; d/da = 10.
;; bind: a=2
;; input: n=5
;; expect: 20
;; grad: a=10
(loop ((i 0) (s 0.0))
  (if (< i n) (recur (+ i 1) (+ s (* a i))) s))
