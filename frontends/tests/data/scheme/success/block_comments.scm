#| a block comment
   spanning lines |#
(a #| inline |# b)
#| outer #| nested |# still outer |#
c
#|#|deep|#|#d
(e #| ) ] ( [ " |# f)
