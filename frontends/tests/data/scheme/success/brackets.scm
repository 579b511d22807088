;; Brackets are vector sugar: [a b c] reads as (vec a b c).
[1 2 3]
[]
[[1 0] [0 1]]
(dot [1 2 3] [4 5 6])
[x (f y) 'z]
