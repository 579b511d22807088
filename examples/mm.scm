;; Michaelis–Menten rate law
(params (Vmax positive 1.0) (Km positive 1.0))
(/ (* Vmax S) (+ Km S))
