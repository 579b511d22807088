; ndvm-fuzz regression, oracle: lanes
; lane 0: alone Ok(Evaluation { value: Number([3.358885546875]), grads: [Gradient { name: "p0", per_lane: [-11.90390625] }, Gradient { name: "p1", per_lane: [0.0] }, Gradient { name: "p2", per_lane: [0.0] }], faults: [false] }), in the batch Some(Evaluation { value: Number([3.358885546875]), grads: [Gradient { name: "p0", per_lane: [-11.903906249999999] }, Gradient { name: "p1", per_lane: [0.0] }, Gradient { name: "p2", per_lane: [0.0] }], faults: [false] })
; found: seed 20261203, program 36
;; param p0: -0.581 0.09
;; param p1: 1.221 -1.058
;; param p2: 0.335 -0.731
(let* ((v1 0.5) (v2 (letrec ((f3 (lambda (n4) (if (< n4 0.5) v1 (+ (case (floor (* 3.0 (sigmoid p1))) ((1.0 2.0) p0) (else n4)) (* 0.5 (f3 (- n4 1.0)))))))) (f3 4.0)))) (* (scale (case 1.0 ((1.0 2.0) 3.0)) v2) v2))
