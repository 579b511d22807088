; ndvm-fuzz regression, oracle: lanes
; lane 1: alone Ok(Evaluation { value: Vector { len: 2, data: [2.75841149230625, 1.73053461025625] }, grads: [Gradient { name: "p0", per_lane: [-6.823059349999999] }, Gradient { name: "p1", per_lane: [3.2081051249999994] }, Gradient { name: "p2", per_lane: [0.0] }], faults: [false] }), in the batch Some(Evaluation { value: Vector { len: 2, data: [2.75841149230625, 1.73053461025625] }, grads: [Gradient { name: "p0", per_lane: [-6.823059350000001] }, Gradient { name: "p1", per_lane: [3.2081051249999994] }, Gradient { name: "p2", per_lane: [0.0] }], faults: [false] })
; found: seed 20261203, program 56
;; param p0: 1.2 -0.895
;; param p1: -0.907 -1.304
;; param p2: 1.313 -1.494
(* (* (cond ((< (fold (lambda (a1 x2) x2) 0.87 (list p0)) 0.5) p0) (else 0.5)) (+ 2.0 (square (* (trace (mat (vec 3.0 p2 p1) (vec p1 p0 p1) (vec p2 3.0 p1))) (+ (vec 0.5 -1.5) 1.0))))) p0)
