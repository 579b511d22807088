; ndvm-fuzz regression, oracle: lanes
; lane 0: alone Ok(Evaluation { value: Number([1.3191005566132545]), grads: [Gradient { name: "p0", per_lane: [1.3534294603519221] }, Gradient { name: "p1", per_lane: [0.0] }], faults: [false] }), in the batch Some(Evaluation { value: Number([1.3191005566132545]), grads: [Gradient { name: "p0", per_lane: [1.3534294603519224] }, Gradient { name: "p1", per_lane: [0.0] }], faults: [false] })
; found: seed 20261203, program 1018
;; param p0: 0.34900000000000003 -1.355
;; param p1: -0.757 1.282
(let ((w3 (cond ((< 0.25 p1) p1) (else p0)))) (+ (tanh (eval (list (quote *) 3.0 (list (quote +) p0 p0)))) w3))
