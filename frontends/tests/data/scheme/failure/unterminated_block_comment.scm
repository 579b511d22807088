;; error: P006 at 2:3
x #| never closed #| nested |#
